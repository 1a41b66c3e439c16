// The JMS conformance suite: unmodified ActiveMQ 5.17 Java client scenarios, run against
// dovecote and against a real ActiveMQ by tests/integration/test_java_conformance.py.
// Usage: java Conformance <openwire-port> <run-id>; prints one "PASS name" or
// "FAIL name: reason" line per scenario.

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.RedeliveryPolicy;

public class Conformance {
    static String url;
    static String run;

    interface Scenario { void run() throws Exception; }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static Connection connect(String options) throws JMSException {
        ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(url + options);
        f.setTrustAllPackages(true);
        Connection c = f.createConnection();
        c.start();
        return c;
    }

    static Connection connect() throws JMSException { return connect(""); }

    static Queue queue(Session s, String name) throws JMSException {
        return s.createQueue(run + "." + name);
    }

    public static void main(String[] args) throws Exception {
        url = "tcp://127.0.0.1:" + args[0];
        run = args[1];
        List<Object[]> scenarios = new ArrayList<>();
        scenarios.add(new Object[] {"text_message", (Scenario) Conformance::textMessage});
        scenarios.add(new Object[] {"bytes_message", (Scenario) Conformance::bytesMessage});
        scenarios.add(new Object[] {"map_message", (Scenario) Conformance::mapMessage});
        scenarios.add(new Object[] {"stream_message", (Scenario) Conformance::streamMessage});
        scenarios.add(new Object[] {"object_message", (Scenario) Conformance::objectMessage});
        scenarios.add(new Object[] {"sync_and_async_send", (Scenario) Conformance::syncAndAsyncSend});
        scenarios.add(new Object[] {"listener", (Scenario) Conformance::listener});
        scenarios.add(new Object[] {"listener_and_receive_mixed", (Scenario) Conformance::mixed});
        scenarios.add(new Object[] {"auto_ack_each_of_many", (Scenario) Conformance::autoAckEachOfMany});
        scenarios.add(new Object[] {"client_acknowledge", (Scenario) Conformance::clientAck});
        scenarios.add(new Object[] {"individual_acknowledge", (Scenario) Conformance::individualAck});
        scenarios.add(new Object[] {"dups_ok_acknowledge", (Scenario) Conformance::dupsOk});
        scenarios.add(new Object[] {"optimize_acknowledge", (Scenario) Conformance::optimizeAck});
        scenarios.add(new Object[] {"prefetch_zero_receive_timeout", (Scenario) Conformance::prefetchZero});
        scenarios.add(new Object[] {"transaction_commit_rollback", (Scenario) Conformance::transactions});
        scenarios.add(new Object[] {"redelivery_exhaustion_to_dlq", (Scenario) Conformance::redeliveryToDlq});
        scenarios.add(new Object[] {"selectors", (Scenario) Conformance::selectors});
        scenarios.add(new Object[] {"durable_subscriber_reconnect", (Scenario) Conformance::durable});
        scenarios.add(new Object[] {"temp_queue_request_reply", (Scenario) Conformance::requestReply});
        scenarios.add(new Object[] {"priority", (Scenario) Conformance::priority});
        scenarios.add(new Object[] {"expiry", (Scenario) Conformance::expiry});
        scenarios.add(new Object[] {"queue_browser", (Scenario) Conformance::browser});
        scenarios.add(new Object[] {"producer_window", (Scenario) Conformance::producerWindow});
        scenarios.add(new Object[] {"invalid_selector_error", (Scenario) Conformance::invalidSelector});
        scenarios.add(new Object[] {"duplicate_client_id_error", (Scenario) Conformance::duplicateClientId});
        for (Object[] s : scenarios) {
            String name = (String) s[0];
            try {
                ((Scenario) s[1]).run();
                System.out.println("PASS " + name);
            } catch (Throwable t) {
                System.out.println("FAIL " + name + ": " + t.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
        System.exit(0);
    }

    static void textMessage() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "text");
            TextMessage m = s.createTextMessage("h\u00e9llo \u20ac");
            m.setStringProperty("color", "red");
            m.setIntProperty("n", 7);
            m.setBooleanProperty("flag", true);
            m.setDoubleProperty("d", 2.5);
            m.setJMSCorrelationID("corr");
            m.setJMSType("kind");
            s.createProducer(q).send(m);
            TextMessage got = (TextMessage) s.createConsumer(q).receive(5000);
            check(got != null, "no message");
            check(got.getText().equals("h\u00e9llo \u20ac"), "text " + got.getText());
            check("red".equals(got.getStringProperty("color")), "string property");
            check(got.getIntProperty("n") == 7, "int property");
            check(got.getBooleanProperty("flag"), "boolean property");
            check(got.getDoubleProperty("d") == 2.5, "double property");
            check("corr".equals(got.getJMSCorrelationID()), "correlation id");
            check("kind".equals(got.getJMSType()), "type");
            check(got.getJMSMessageID().equals(m.getJMSMessageID()), "message id");
            check(!got.getJMSRedelivered(), "redelivered");
        } finally { c.close(); }
    }

    static void bytesMessage() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "bytes");
            BytesMessage m = s.createBytesMessage();
            m.writeInt(42);
            m.writeUTF("x");
            m.writeBytes(new byte[] {0, 1, 2, (byte) 255});
            s.createProducer(q).send(m);
            BytesMessage got = (BytesMessage) s.createConsumer(q).receive(5000);
            check(got != null, "no message");
            check(got.readInt() == 42 && got.readUTF().equals("x"), "content");
            byte[] tail = new byte[4];
            check(got.readBytes(tail) == 4 && tail[3] == (byte) 255, "bytes");
        } finally { c.close(); }
    }

    static void mapMessage() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "map");
            MapMessage m = s.createMapMessage();
            m.setString("s", "v");
            m.setLong("l", 1L << 40);
            m.setBytes("b", new byte[] {9});
            s.createProducer(q).send(m);
            MapMessage got = (MapMessage) s.createConsumer(q).receive(5000);
            check(got != null, "no message");
            check("v".equals(got.getString("s")) && got.getLong("l") == 1L << 40, "map values");
            check(got.getBytes("b")[0] == 9, "bytes value");
        } finally { c.close(); }
    }

    static void streamMessage() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "stream");
            StreamMessage m = s.createStreamMessage();
            m.writeString("a");
            m.writeInt(3);
            m.writeBoolean(true);
            s.createProducer(q).send(m);
            StreamMessage got = (StreamMessage) s.createConsumer(q).receive(5000);
            check(got != null, "no message");
            check(got.readString().equals("a") && got.readInt() == 3 && got.readBoolean(), "stream");
        } finally { c.close(); }
    }

    static class Payload implements Serializable {
        private static final long serialVersionUID = 1L;
        String name = "payload";
    }

    static void objectMessage() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "object");
            s.createProducer(q).send(s.createObjectMessage(new Payload()));
            ObjectMessage got = (ObjectMessage) s.createConsumer(q).receive(5000);
            check(got != null, "no message");
            check(((Payload) got.getObject()).name.equals("payload"), "object");
        } finally { c.close(); }
    }

    static void syncAndAsyncSend() throws Exception {
        Connection c = connect("?jms.useAsyncSend=true");
        Connection d = connect();
        try {
            for (Connection conn : new Connection[] {c, d}) {
                Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = queue(s, "send" + (conn == c ? "async" : "sync"));
                MessageProducer p = s.createProducer(q);
                p.setDeliveryMode(DeliveryMode.PERSISTENT);
                for (int i = 0; i < 20; i++) p.send(s.createTextMessage("m" + i));
                MessageConsumer mc = s.createConsumer(q);
                for (int i = 0; i < 20; i++) {
                    TextMessage got = (TextMessage) mc.receive(5000);
                    check(got != null && got.getText().equals("m" + i), "order at " + i);
                }
            }
        } finally { c.close(); d.close(); }
    }

    static void listener() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "listener");
            CountDownLatch latch = new CountDownLatch(5);
            s.createConsumer(q).setMessageListener(m -> latch.countDown());
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < 5; i++) p.send(s.createTextMessage("x"));
            check(latch.await(10, TimeUnit.SECONDS), "listener got " + (5 - latch.getCount()));
        } finally { c.close(); }
    }

    // An auto-acknowledging consumer acks each message: many of them, in flight a prefetch
    // window at a time, each acked alone, come in order and once; those still in flight when
    // it closes (prefetched, never acked) all come again, in order, to the next consumer.
    static void autoAckEachOfMany() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "many");
            MessageProducer p = s.createProducer(q);
            p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            for (int i = 0; i < 3000; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer first = s.createConsumer(q);
            for (int i = 0; i < 1500; i++) {
                Message m = first.receive(5000);
                check(m != null, "message " + i + " did not come");
                String text = ((TextMessage) m).getText();
                check(text.equals("m" + i), "message " + i + " was " + text);
                check(!m.getJMSRedelivered(), "message " + i + " redelivered");
            }
            first.close();
            MessageConsumer second = s.createConsumer(q);
            for (int i = 1500; i < 3000; i++) {
                Message m = second.receive(5000);
                check(m != null, "message " + i + " did not come again");
                String text = ((TextMessage) m).getText();
                check(text.equals("m" + i), "message " + i + " was " + text + " the second time");
            }
            check(second.receive(500) == null, "the queue kept an acknowledged message");
        } finally { c.close(); }
    }

    static void mixed() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "mixed");
            s.createConsumer(q).setMessageListener(m -> {});
            MessageConsumer other = s.createConsumer(queue(s, "mixed2"));
            try {
                other.receive(100);
                check(false, "receive allowed on a session with a listener");
            } catch (javax.jms.IllegalStateException expected) {
                // the seeds: a session with a listener refuses synchronous receive
            }
        } finally { c.close(); }
    }

    static void clientAck() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Queue q = queue(s, "clientack");
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer mc = s.createConsumer(q);
            mc.receive(5000);
            Message second = mc.receive(5000);
            check(second != null, "no second");
            second.acknowledge();  // acknowledges everything delivered so far in the session
            mc.close();
            MessageConsumer again = s.createConsumer(q);
            TextMessage rest = (TextMessage) again.receive(5000);
            check(rest != null && rest.getText().equals("m2"), "left after ack: " + rest);
            rest.acknowledge();
            check(again.receive(300) == null, "more than one left");
        } finally { c.close(); }
    }

    static void individualAck() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, ActiveMQSession_INDIVIDUAL);
            Queue q = queue(s, "individual");
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer mc = s.createConsumer(q);
            mc.receive(5000);
            Message second = mc.receive(5000);
            mc.receive(5000);
            second.acknowledge();
            mc.close();
            Session s2 = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer again = s2.createConsumer(q);
            List<String> left = new ArrayList<>();
            Message m;
            while ((m = again.receive(1000)) != null) left.add(((TextMessage) m).getText());
            check(left.size() == 2 && left.contains("m0") && left.contains("m2"), "left " + left);
        } finally { c.close(); }
    }

    static final int ActiveMQSession_INDIVIDUAL = 4;  // ActiveMQSession.INDIVIDUAL_ACKNOWLEDGE

    static void dupsOk() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.DUPS_OK_ACKNOWLEDGE);
            Queue q = queue(s, "dupsok");
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < 10; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer mc = s.createConsumer(q);
            for (int i = 0; i < 10; i++) check(mc.receive(5000) != null, "missing " + i);
        } finally { c.close(); }
    }

    static void optimizeAck() throws Exception {
        Connection c = connect("?jms.optimizeAcknowledge=true&jms.prefetchPolicy.queuePrefetch=10");
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "optack");
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < 50; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer mc = s.createConsumer(q);
            for (int i = 0; i < 50; i++) check(mc.receive(5000) != null, "missing " + i);
        } finally { c.close(); }
    }

    static void prefetchZero() throws Exception {
        Connection c = connect("?jms.prefetchPolicy.queuePrefetch=0");
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "pull");
            MessageConsumer mc = s.createConsumer(q);
            long start = System.currentTimeMillis();
            check(mc.receive(500) == null, "message from an empty queue");
            check(System.currentTimeMillis() - start >= 400, "returned before the timeout");
            check(mc.receiveNoWait() == null, "receiveNoWait");
            s.createProducer(q).send(s.createTextMessage("pulled"));
            TextMessage got = (TextMessage) mc.receive(5000);
            check(got != null && got.getText().equals("pulled"), "pull");
        } finally { c.close(); }
    }

    static void transactions() throws Exception {
        Connection c = connect();
        try {
            Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
            Queue q = queue(tx, "tx");
            MessageProducer p = tx.createProducer(q);
            p.send(tx.createTextMessage("rolled back"));
            tx.rollback();
            p.send(tx.createTextMessage("committed"));
            tx.commit();
            MessageConsumer mc = tx.createConsumer(q);
            TextMessage got = (TextMessage) mc.receive(5000);
            check(got != null && got.getText().equals("committed"), "commit: " + got);
            tx.rollback();
            TextMessage again = (TextMessage) mc.receive(5000);
            check(again != null && again.getText().equals("committed"), "redelivery after rollback");
            check(again.getJMSRedelivered(), "redelivered flag");
            tx.commit();
            check(mc.receive(300) == null, "consumed after commit");
        } finally { c.close(); }
    }

    static void redeliveryToDlq() throws Exception {
        ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(url);
        RedeliveryPolicy policy = f.getRedeliveryPolicy();
        policy.setMaximumRedeliveries(2);
        policy.setInitialRedeliveryDelay(0);
        policy.setRedeliveryDelay(0);
        Connection c = f.createConnection();
        c.start();
        try {
            Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
            Queue q = queue(tx, "poison");
            MessageProducer p = tx.createProducer(q);
            p.setDeliveryMode(DeliveryMode.PERSISTENT);
            TextMessage m = tx.createTextMessage("poison");
            m.setStringProperty("run", run);
            p.send(m);
            tx.commit();
            MessageConsumer mc = tx.createConsumer(q);
            int deliveries = 0;
            Message got;
            while ((got = mc.receive(1000)) != null) {
                deliveries++;
                tx.rollback();
            }
            check(deliveries == 3, "deliveries " + deliveries);
            MessageConsumer dlq = tx.createConsumer(tx.createQueue("ActiveMQ.DLQ"), "run = '" + run + "'");
            Message dead = dlq.receive(5000);
            check(dead != null && ((TextMessage) dead).getText().equals("poison"), "not in the DLQ");
            tx.commit();
        } finally { c.close(); }
    }

    static void selectors() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "selectors");
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < 6; i++) {
                Message m = s.createTextMessage("m" + i);
                m.setIntProperty("n", i);
                m.setStringProperty("color", i % 2 == 0 ? "red" : "blue");
                p.send(m);
            }
            MessageConsumer mc = s.createConsumer(q, "n >= 2 AND color = 'red'");
            List<String> got = new ArrayList<>();
            Message m;
            while ((m = mc.receive(500)) != null) got.add(((TextMessage) m).getText());
            check(got.size() == 2 && got.get(0).equals("m2") && got.get(1).equals("m4"), "got " + got);
        } finally { c.close(); }
    }

    static void durable() throws Exception {
        String clientId = run + "-durable";
        Connection c = connect("?jms.clientID=" + clientId);
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic t = s.createTopic(run + ".news");
        s.createDurableSubscriber(t, "sub").close();
        c.close();
        Connection p = connect();
        Session ps = p.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer producer = ps.createProducer(ps.createTopic(run + ".news"));
        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        producer.send(ps.createTextMessage("while away"));
        p.close();
        Connection back = connect("?jms.clientID=" + clientId);
        try {
            Session bs = back.createSession(false, Session.AUTO_ACKNOWLEDGE);
            TopicSubscriber sub = bs.createDurableSubscriber(bs.createTopic(run + ".news"), "sub");
            TextMessage got = (TextMessage) sub.receive(5000);
            check(got != null && got.getText().equals("while away"), "backlog " + got);
            sub.close();
            bs.unsubscribe("sub");
        } finally { back.close(); }
    }

    static void requestReply() throws Exception {
        Connection server = connect();
        Connection client = connect();
        try {
            Session ss = server.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue service = queue(ss, "service");
            MessageProducer replies = ss.createProducer(null);
            ss.createConsumer(service).setMessageListener(m -> {
                try {
                    TextMessage r = ss.createTextMessage("pong");
                    r.setJMSCorrelationID(m.getJMSMessageID());
                    replies.send(m.getJMSReplyTo(), r);
                } catch (JMSException e) { throw new RuntimeException(e); }
            });
            Session cs = client.createSession(false, Session.AUTO_ACKNOWLEDGE);
            TemporaryQueue replyTo = cs.createTemporaryQueue();
            TextMessage req = cs.createTextMessage("ping");
            req.setJMSReplyTo(replyTo);
            cs.createProducer(queue(cs, "service")).send(req);
            TextMessage reply = (TextMessage) cs.createConsumer(replyTo).receive(5000);
            check(reply != null && reply.getText().equals("pong"), "reply " + reply);
            check(req.getJMSMessageID().equals(reply.getJMSCorrelationID()), "correlation");
        } finally { server.close(); client.close(); }
    }

    static void priority() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "priority");
            MessageProducer p = s.createProducer(q);
            int[] priorities = {1, 9, 4, 7};
            for (int pr : priorities) p.send(s.createTextMessage("p" + pr), DeliveryMode.NON_PERSISTENT, pr, 0);
            MessageConsumer mc = s.createConsumer(q);
            StringBuilder order = new StringBuilder();
            for (int i = 0; i < 4; i++) order.append(((TextMessage) mc.receive(5000)).getText());
            check(order.toString().equals("p9p7p4p1"), "order " + order);
        } finally { c.close(); }
    }

    static void expiry() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "expiry");
            MessageProducer p = s.createProducer(q);
            p.send(s.createTextMessage("short"), DeliveryMode.NON_PERSISTENT, 4, 100);
            p.send(s.createTextMessage("long"), DeliveryMode.NON_PERSISTENT, 4, 60000);
            Thread.sleep(300);  // let the first one expire
            TextMessage got = (TextMessage) s.createConsumer(q).receive(5000);
            check(got != null && got.getText().equals("long"), "got " + (got == null ? null : got.getText()));
        } finally { c.close(); }
    }

    static void browser() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "browse");
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("b" + i));
            int seen = 0;
            Enumeration<?> e = s.createBrowser(q).getEnumeration();
            while (e.hasMoreElements()) { e.nextElement(); seen++; }
            check(seen == 3, "browsed " + seen);
            MessageConsumer mc = s.createConsumer(q);
            for (int i = 0; i < 3; i++) check(mc.receive(5000) != null, "consumed " + i);
        } finally { c.close(); }
    }

    static void producerWindow() throws Exception {
        // The broker holds ProducerAcks back while the destination is over its memory limit
        // (both brokers run "*.window" queues with a 64 KiB limit): a producer with a 2 KiB
        // window stalls until a consumer drains the queue.
        Connection c = connect("?jms.producerWindowSize=2048&jms.useAsyncSend=true");
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = queue(s, "window");
            MessageProducer p = s.createProducer(q);
            p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);  // kept in memory by both brokers
            final int total = 300;
            java.util.concurrent.atomic.AtomicInteger sent = new java.util.concurrent.atomic.AtomicInteger();
            AtomicReference<Exception> failure = new AtomicReference<>();
            char[] body = new char[1024];
            java.util.Arrays.fill(body, 'w');
            Thread producer = new Thread(() -> {
                try {
                    for (int i = 0; i < total; i++) {
                        p.send(s.createTextMessage(new String(body)));
                        sent.incrementAndGet();
                    }
                } catch (Exception e) { failure.set(e); }
            });
            producer.start();
            int last = -1;
            long deadline = System.currentTimeMillis() + 15000;
            while (System.currentTimeMillis() < deadline) {  // wait until the producer stalls
                Thread.sleep(500);
                int now = sent.get();
                if (now == last || now == total) break;
                last = now;
            }
            int stalledAt = sent.get();
            check(stalledAt < total, "the producer was never held back (" + stalledAt + " sent)");
            Session cs = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer mc = cs.createConsumer(q);
            for (int i = 0; i < total; i++) check(mc.receive(10000) != null, "missing " + i);
            producer.join(10000);
            check(failure.get() == null, "send failed: " + failure.get());
            check(sent.get() == total, "sent " + sent.get());
        } finally { c.close(); }
    }

    static void invalidSelector() throws Exception {
        Connection c = connect();
        try {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            try {
                s.createConsumer(queue(s, "badselector"), "color = = 'red'");
                check(false, "an invalid selector was accepted");
            } catch (InvalidSelectorException expected) {
                check(expected.getMessage() != null && !expected.getMessage().isEmpty(), "no message");
            }
            // The connection goes on after the error.
            Queue q = queue(s, "afterbad");
            s.createProducer(q).send(s.createTextMessage("fine"));
            check(s.createConsumer(q).receive(5000) != null, "connection unusable after the error");
        } finally { c.close(); }
    }

    static void duplicateClientId() throws Exception {
        Connection first = connect("?jms.clientID=" + run + "-dup");
        try {
            try {
                connect("?jms.clientID=" + run + "-dup").close();
                check(false, "a second connection with the same client id was accepted");
            } catch (InvalidClientIDException expected) {
                // as ActiveMQ answers it
            }
        } finally { first.close(); }
    }
}
