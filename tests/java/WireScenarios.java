// Scenarios the Java client 5.17 runs so tests/integration/test_python_client_vs_java.py can
// record what it sends and compare it with what dovecote's Python client sends for the same.
// java WireScenarios <port> <queue> <scenario>
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

public class WireScenarios {
    public static void main(String[] a) throws Exception {
        String scenario = a[2];
        String url = "tcp://127.0.0.1:" + a[0] + "?wireFormat.tightEncodingEnabled=false&wireFormat.cacheEnabled=false";
        if (scenario.equals("client_ack_prefetch_1")) url += "&jms.prefetchPolicy.queuePrefetch=1";
        if (scenario.equals("transacted")) url += "&jms.prefetchPolicy.queuePrefetch=2";
        if (scenario.equals("dups_ok_topic")) url += "&jms.prefetchPolicy.topicPrefetch=4";
        if (scenario.equals("pull")) url += "&jms.prefetchPolicy.queuePrefetch=0";
        ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(url);
        f.getRedeliveryPolicy().setInitialRedeliveryDelay(0);
        f.getRedeliveryPolicy().setRedeliveryDelay(0);
        if (scenario.equals("poison")) f.getRedeliveryPolicy().setMaximumRedeliveries(1);
        Connection c = f.createConnection();
        if (scenario.equals("options") || scenario.equals("durable_reconnect")) c.setClientID(a[1]);
        c.start();
        boolean tx = scenario.equals("transacted");
        if (scenario.equals("transacted_session_close")) tx = true;
        int mode = Session.CLIENT_ACKNOWLEDGE;
        if (scenario.equals("auto") || scenario.equals("expired") || scenario.equals("options") || scenario.equals("browse")
            || scenario.equals("listener_auto_exception") || scenario.equals("pull") || scenario.equals("temp_queue")
            || scenario.equals("message_fields")) mode = Session.AUTO_ACKNOWLEDGE;
        if (scenario.equals("dups_ok_queue")) mode = Session.DUPS_OK_ACKNOWLEDGE;
        if (scenario.equals("transacted_session_close")) tx = true;
        if (scenario.equals("individual")) mode = 4;  // ActiveMQSession.INDIVIDUAL_ACKNOWLEDGE
        if (scenario.equals("dups_ok_topic")) mode = Session.DUPS_OK_ACKNOWLEDGE;
        Session s = c.createSession(tx, tx ? Session.SESSION_TRANSACTED : mode);
        javax.jms.Queue q = s.createQueue(a[1]);
        MessageProducer p = s.createProducer(q);
        if (scenario.equals("client_ack_prefetch_1")) {
            for (int i = 0; i < 5; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            Message last = null;
            for (int i = 0; i < 5; i++) last = consumer.receive(5000);
            last.acknowledge();
        } else if (scenario.equals("session_close")) {
            for (int i = 0; i < 5; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            consumer.receive(5000);
            consumer.receive(5000);
            s.close();
        } else if (scenario.equals("recover")) {
            p.send(s.createTextMessage("m0"));
            MessageConsumer consumer = s.createConsumer(q);
            for (int i = 0; i < 2; i++) {
                consumer.receive(5000);
                s.recover();
            }
            consumer.receive(5000).acknowledge();
            consumer.close();
        } else if (scenario.equals("transacted")) {
            p.send(s.createTextMessage("m0"));
            p.send(s.createTextMessage("m1"));
            s.commit();
            MessageConsumer consumer = s.createConsumer(q);
            consumer.receive(5000);
            consumer.receive(5000);
            s.commit();
            consumer.receive(300);
            s.rollback();
        } else if (scenario.equals("expired")) {
            MessageConsumer consumer = s.createConsumer(q);
            p.send(s.createTextMessage("short"), DeliveryMode.PERSISTENT, 4, 300);
            p.send(s.createTextMessage("long"));
            Thread.sleep(600);
            consumer.receive(5000);
            consumer.receive(300);
        } else if (scenario.equals("individual")) {
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            consumer.receive(5000);
            consumer.receive(5000).acknowledge();
            consumer.receive(5000);
        } else if (scenario.equals("dups_ok_topic")) {
            Topic topic = s.createTopic(a[1]);
            MessageConsumer consumer = s.createConsumer(topic);
            MessageProducer tp = s.createProducer(topic);
            for (int i = 0; i < 6; i++) tp.send(s.createTextMessage("t" + i));
            for (int i = 0; i < 6; i++) consumer.receive(5000);
            consumer.close();
        } else if (scenario.equals("options")) {
            s.createConsumer(s.createQueue(a[1] + "?consumer.exclusive=true&consumer.priority=3&consumer.prefetchSize=7"));
            Topic topic = s.createTopic(a[1]);
            s.createConsumer(topic, null, true);
            s.createDurableSubscriber(topic, "sub", "a > 1", false).close();
            s.unsubscribe("sub");
        } else if (scenario.equals("listener_client")) {
            final Object done = new Object();
            final int[] count = {0};
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            consumer.setMessageListener(m -> {
                try {
                    if (((TextMessage) m).getText().equals("m1")) m.acknowledge();
                } catch (JMSException e) { throw new RuntimeException(e); }
                synchronized (done) { count[0]++; done.notifyAll(); }
            });
            synchronized (done) { while (count[0] < 3) done.wait(5000); }
        } else if (scenario.equals("browse")) {
            p.send(s.createTextMessage("m0"));
            p.send(s.createTextMessage("m1"));
            java.util.Enumeration<?> e = s.createBrowser(q).getEnumeration();
            while (e.hasMoreElements()) e.nextElement();
        } else if (scenario.equals("connection_close_unacked")) {
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            consumer.receive(5000);
            consumer.receive(5000);
        } else if (scenario.equals("listener_auto_exception")) {
            p.send(s.createTextMessage("m0"));
            final Object done = new Object();
            final int[] count = {0};
            s.createConsumer(q).setMessageListener(m -> {
                synchronized (done) { count[0]++; done.notifyAll(); }
                if (count[0] == 1) throw new RuntimeException("first delivery fails");
            });
            synchronized (done) { while (count[0] < 2) done.wait(5000); }
            Thread.sleep(200);
        } else if (scenario.equals("transacted_session_close")) {
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            s.commit();
            MessageConsumer consumer = s.createConsumer(q);
            consumer.receive(5000);
            s.close();
        } else if (scenario.equals("pull")) {
            p.send(s.createTextMessage("m0"));
            MessageConsumer consumer = s.createConsumer(q);
            consumer.receive(2000);
            consumer.receive(300);
            consumer.receiveNoWait();
        } else if (scenario.equals("temp_queue")) {
            TemporaryQueue temp = s.createTemporaryQueue();
            MessageConsumer consumer = s.createConsumer(temp);
            s.createProducer(temp).send(s.createTextMessage("t0"));
            consumer.receive(5000);
            consumer.close();
            temp.delete();
        } else if (scenario.equals("poison")) {
            p.send(s.createTextMessage("m0"));
            MessageConsumer consumer = s.createConsumer(q);
            for (int i = 0; i < 2; i++) {
                consumer.receive(5000);
                s.recover();
            }
            consumer.receive(500);
        } else if (scenario.equals("dups_ok_queue")) {
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            for (int i = 0; i < 3; i++) consumer.receive(5000);
        } else if (scenario.equals("message_fields")) {
            TextMessage m = s.createTextMessage("g1");
            m.setStringProperty("JMSXGroupID", "g");
            m.setIntProperty("JMSXGroupSeq", 1);
            m.setStringProperty("JMSXUserID", "alice");
            m.setJMSCorrelationID("c1");
            m.setJMSType("kind");
            m.setIntProperty("i", 7);
            m.setShortProperty("s", (short) -3);
            m.setByteProperty("b", (byte) 5);
            m.setFloatProperty("f", 1.5f);
            m.setLongProperty("l", 1L << 40);
            m.setDoubleProperty("d", 2.25);
            m.setBooleanProperty("t", true);
            p.send(m, DeliveryMode.NON_PERSISTENT, 7, 60000);
            p.close();
        } else if (scenario.equals("durable_reconnect")) {
            Topic topic = s.createTopic(a[1]);
            s.createDurableSubscriber(topic, "sub").close();
            MessageProducer anonymous = s.createProducer(null);
            for (int i = 0; i < 3; i++) anonymous.send(topic, s.createTextMessage("d" + i));
            MessageConsumer again = s.createDurableSubscriber(topic, "sub");
            for (int i = 0; i < 3; i++) again.receive(5000);
            again.close();
            s.unsubscribe("sub");
        } else if (scenario.equals("recover_in_listener")) {
            p.send(s.createTextMessage("m0"));
            final Object done = new Object();
            final int[] count = {0};
            final Session session = s;
            s.createConsumer(q).setMessageListener(m -> {
                try {
                    synchronized (done) { count[0]++; done.notifyAll(); }
                    if (count[0] == 1) session.recover(); else m.acknowledge();
                } catch (JMSException e) { throw new RuntimeException(e); }
            });
            synchronized (done) { while (count[0] < 2) done.wait(5000); }
            Thread.sleep(200);
        } else if (scenario.equals("auto")) {
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            for (int i = 0; i < 3; i++) consumer.receive(5000);
            consumer.close();
        }
        c.close();
    }
}
