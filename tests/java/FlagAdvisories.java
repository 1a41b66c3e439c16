// ActiveMQ 5.17's policy-flagged advisories as the unmodified Java client sees them, for
// tests/differential/test_advisory_flags.py: run against dovecote and a real ActiveMQ with the
// same policies (flag.> queues and topics, flagd.> topics with a pending limit of 2).
// Usage: java FlagAdvisories <openwire-port> <run-id>; prints one "name: outcome" line per
// scenario. Outcomes name no ids, times or hosts.

import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQDestination;
import org.apache.activemq.command.ActiveMQMessage;
import org.apache.activemq.command.ActiveMQQueue;
import org.apache.activemq.command.ActiveMQTopic;
import org.apache.activemq.command.ConsumerInfo;
import org.apache.activemq.command.DataStructure;
import org.apache.activemq.command.ProducerInfo;

public class FlagAdvisories {
    static String url;
    static String run;

    interface Scenario { String run() throws Exception; }

    static ActiveMQConnection connect(String options) throws JMSException {
        ActiveMQConnection c = (ActiveMQConnection) new ActiveMQConnectionFactory(url + options)
            .createConnection();
        c.start();
        return c;
    }

    /** Every advisory on the topics given (comma-separated), described as they come. */
    static class Listen implements AutoCloseable {
        final ActiveMQConnection c;
        final List<String> got = new CopyOnWriteArrayList<>();

        Listen(String topics) throws JMSException {
            c = connect("");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            s.createConsumer(new ActiveMQTopic(topics)).setMessageListener(m -> {
                try {
                    got.add(describe(m));
                } catch (JMSException e) {
                    got.add("ERROR " + e);
                }
            });
        }

        /** What came, once ``count`` have (or 5 s passed), and 500 ms more. */
        List<String> await(int count) throws Exception {
            long deadline = System.currentTimeMillis() + 5000;
            while (got.size() < count && System.currentTimeMillis() < deadline) Thread.sleep(50);
            Thread.sleep(500);
            return new ArrayList<>(got);
        }

        public void close() throws JMSException { c.close(); }
    }

    static String describe(Message m) throws JMSException {
        ActiveMQMessage am = (ActiveMQMessage) m;
        StringBuilder b = new StringBuilder();
        b.append(((ActiveMQDestination) m.getJMSDestination()).getPhysicalName().replace(run, "R"));
        DataStructure d = am.getDataStructure();
        b.append(" ").append(d == null ? "null" : d.getClass().getSimpleName());
        if (d instanceof ConsumerInfo) {
            ConsumerInfo ci = (ConsumerInfo) d;
            b.append("(").append(name(ci.getDestination())).append(" prefetch=")
                .append(ci.getPrefetchSize()).append(" sameId=")
                .append(ci.getConsumerId().toString().equals(m.getStringProperty("consumerId")))
                .append(")");
        } else if (d instanceof ProducerInfo) {
            ProducerInfo pi = (ProducerInfo) d;
            b.append("(").append(name(pi.getDestination())).append(" sameId=")
                .append(pi.getProducerId().toString().equals(m.getStringProperty("producerId")))
                .append(")");
        } else if (d instanceof Message) {
            ActiveMQMessage payload = (ActiveMQMessage) d;
            b.append("(").append(name(payload.getDestination())).append(" run=")
                .append(payload.getStringProperty("run"))
                .append(" sameId=").append(payload.getJMSMessageID().equals(m.getStringProperty("orignalMessageId")))
                .append(" body=").append(payload instanceof TextMessage ? ((TextMessage) payload).getText() : "?")
                .append(")");
        }
        b.append(" type=").append(m.getJMSType()).append(" persistent=")
            .append(m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT);
        Set<String> props = new TreeSet<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements(); ) {
            String p = (String) e.nextElement();
            Object v = m.getObjectProperty(p);
            if (p.equals("orignalDestination") || p.equals("usageName") || p.equals("discardedCount")) {
                props.add(p + "=" + String.valueOf(v).replace(run, "R") + ":" + v.getClass().getSimpleName());
            } else if (p.equals("usageCount")) {
                props.add(p + ":" + v.getClass().getSimpleName());
            } else {
                props.add(p);
            }
        }
        b.append(" ").append(props);
        return b.toString();
    }

    static String name(ActiveMQDestination d) {
        return d == null ? "null" : d.getQualifiedName().replace(run, "R");
    }

    static void send(Session s, Destination to, String body) throws JMSException {
        MessageProducer p = s.createProducer(to);
        p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
        TextMessage m = s.createTextMessage(body);
        m.setStringProperty("run", body);
        p.send(m);
        p.close();
    }

    /** A message enqueued on a queue or sent to a topic; not where the flag is off. */
    static String delivered() throws Exception {
        String q = "flag.dlv." + run, t = "flag.dlvt." + run, off = "noflag.dlv." + run;
        try (Listen l = new Listen("ActiveMQ.Advisory.MessageDelivered.Queue." + q
                + ",ActiveMQ.Advisory.MessageDelivered.Topic." + t
                + ",ActiveMQ.Advisory.MessageDelivered.Queue." + off)) {
            ActiveMQConnection c = connect("");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            send(s, new ActiveMQQueue(off), "off");
            send(s, new ActiveMQQueue(q), "q1");
            send(s, new ActiveMQTopic(t), "t1");
            c.close();
            return String.join(" | ", l.await(2));
        }
    }

    /** Messages acknowledged by a queue's consumer; a browse or a receive without ack is not. */
    static String consumed() throws Exception {
        String q = "flag.con." + run;
        try (Listen l = new Listen("ActiveMQ.Advisory.MessageConsumed.Queue." + q)) {
            ActiveMQConnection c = connect("");
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            send(s, new ActiveMQQueue(q), "c1");
            send(s, new ActiveMQQueue(q), "c2");
            MessageConsumer consumer = s.createConsumer(new ActiveMQQueue(q));
            Message first = consumer.receive(2000);
            Message second = consumer.receive(2000);
            Thread.sleep(300);
            int before = l.got.size();
            second.acknowledge();
            List<String> seen = l.await(2);
            c.close();
            return "beforeAck=" + before + " " + String.join(" | ", seen);
        }
    }

    /** Messages a transacted session received: told of at its commit, none before. */
    static String consumedInTransaction() throws Exception {
        String q = "flag.cont." + run;
        try (Listen l = new Listen("ActiveMQ.Advisory.MessageConsumed.Queue." + q)) {
            ActiveMQConnection c = connect("");
            Session p = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            send(p, new ActiveMQQueue(q), "x1");
            send(p, new ActiveMQQueue(q), "x2");
            Session s = c.createSession(true, Session.SESSION_TRANSACTED);
            MessageConsumer consumer = s.createConsumer(new ActiveMQQueue(q));
            consumer.receive(2000);
            consumer.receive(2000);
            Thread.sleep(300);
            int before = l.got.size();
            s.commit();
            List<String> seen = l.await(2);
            c.close();
            return "beforeCommit=" + before + " " + String.join(" | ", seen);
        }
    }

    /** A topic subscriber that never reads, prefetch 10: told of once it is slow. */
    static String slowConsumer() throws Exception {
        String t = "flag.slow." + run;
        try (Listen l = new Listen("ActiveMQ.Advisory.SlowConsumer.Topic." + t)) {
            ActiveMQConnection reader = connect("?jms.prefetchPolicy.topicPrefetch=10");
            Session rs = reader.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            rs.createConsumer(new ActiveMQTopic(t));
            ActiveMQConnection c = connect("");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            List<Integer> counts = new ArrayList<>();
            for (int i = 1; i <= 30; i++) {
                send(s, new ActiveMQTopic(t), "s" + i);
                Thread.sleep(60);
                counts.add(l.got.size());
            }
            List<String> seen = l.await(1);
            c.close();
            reader.close();
            return "firstAt=" + (counts.indexOf(1) + 1) + " " + String.join(" | ", seen);
        }
    }

    /** A durable subscriber that never reads, prefetch 10: slow once its window is full. */
    static String slowDurable() throws Exception {
        String t = "flag.slowd." + run;
        try (Listen l = new Listen("ActiveMQ.Advisory.SlowConsumer.Topic." + t)) {
            ActiveMQConnection reader = connect(
                "?jms.prefetchPolicy.durableTopicPrefetch=10&jms.clientID=slow-" + run);
            Session rs = reader.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            rs.createDurableSubscriber(new ActiveMQTopic(t), "sub");
            ActiveMQConnection c = connect("");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            List<Integer> counts = new ArrayList<>();
            for (int i = 1; i <= 15; i++) {
                send(s, new ActiveMQTopic(t), "s" + i);
                Thread.sleep(60);
                counts.add(l.got.size());
            }
            List<String> seen = l.await(1);
            c.close();
            rs.close();
            reader.close();
            return "firstAt=" + (counts.indexOf(1) + 1) + " " + String.join(" | ", seen);
        }
    }

    /** A topic subscriber (prefetch 1, pending limit 2) that never reads: each message its
     *  limit drops is told of, with the subscriber's running count. */
    static String discarded() throws Exception {
        String t = "flagd.disc." + run;
        try (Listen l = new Listen("ActiveMQ.Advisory.MessageDiscarded.Topic." + t)) {
            ActiveMQConnection reader = connect("?jms.prefetchPolicy.topicPrefetch=1");
            Session rs = reader.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            rs.createConsumer(new ActiveMQTopic(t));
            ActiveMQConnection c = connect("");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            for (int i = 1; i <= 6; i++) send(s, new ActiveMQTopic(t), "d" + i);
            List<String> seen = l.await(3);
            c.close();
            reader.close();
            return String.join(" | ", seen);
        }
    }

    /** Sends that find the queue's memory (4 kB) full: FULL and FastProducer, each once per
     *  such send; a consumer then drains the queue and the producer finishes. */
    static String full() throws Exception {
        String q = "flag.full." + run;
        try (Listen full = new Listen("ActiveMQ.Advisory.FULL.Queue." + q);
             Listen fast = new Listen("ActiveMQ.Advisory.FastProducer.Queue." + q)) {
            ActiveMQConnection c = connect("?jms.alwaysSyncSend=true");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer p = s.createProducer(new ActiveMQQueue(q));
            p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            String body = new String(new char[1500]).replace('\0', 'x');
            Thread producer = new Thread(() -> {
                try {
                    for (int i = 0; i < 8; i++) p.send(s.createTextMessage(body));
                } catch (JMSException e) {
                    throw new RuntimeException(e);
                }
            });
            producer.start();
            long deadline = System.currentTimeMillis() + 5000;
            while (full.got.isEmpty() && System.currentTimeMillis() < deadline) Thread.sleep(50);
            boolean blocked = producer.isAlive();
            ActiveMQConnection r = connect("");
            MessageConsumer consumer = r.createSession(false, Session.AUTO_ACKNOWLEDGE)
                .createConsumer(new ActiveMQQueue(q));
            int received = 0;
            while (consumer.receive(2000) != null) received++;
            producer.join(5000);
            r.close();
            c.close();
            List<String> f = full.await(1), p2 = fast.await(1);
            return "blocked=" + blocked + " received=" + received
                + " full=" + (f.isEmpty() ? "none" : f.get(0))
                + " fast=" + (p2.isEmpty() ? "none" : p2.get(0));
        }
    }

    public static void main(String[] args) throws Exception {
        url = "tcp://127.0.0.1:" + args[0];
        run = args[1];
        Map<String, Scenario> scenarios = new TreeMap<>();
        scenarios.put("delivered", FlagAdvisories::delivered);
        scenarios.put("consumed", FlagAdvisories::consumed);
        scenarios.put("consumed_in_transaction", FlagAdvisories::consumedInTransaction);
        scenarios.put("slow_consumer", FlagAdvisories::slowConsumer);
        scenarios.put("slow_durable", FlagAdvisories::slowDurable);
        scenarios.put("discarded", FlagAdvisories::discarded);
        scenarios.put("full", FlagAdvisories::full);
        for (Map.Entry<String, Scenario> s : scenarios.entrySet()) {
            if (args.length > 2 && !s.getKey().equals(args[2])) continue;
            String outcome;
            try {
                outcome = s.getValue().run();
            } catch (Throwable t) {
                outcome = "ERROR " + t.toString().replace('\n', ' ');
            }
            System.out.println(s.getKey() + ": " + outcome);
        }
    }
}
