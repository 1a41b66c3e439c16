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
        ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(url);
        f.getRedeliveryPolicy().setInitialRedeliveryDelay(0);
        f.getRedeliveryPolicy().setRedeliveryDelay(0);
        Connection c = f.createConnection();
        c.start();
        boolean tx = scenario.equals("transacted");
        int mode = scenario.equals("auto") || scenario.equals("expired") ? Session.AUTO_ACKNOWLEDGE : Session.CLIENT_ACKNOWLEDGE;
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
        } else if (scenario.equals("auto")) {
            for (int i = 0; i < 3; i++) p.send(s.createTextMessage("m" + i));
            MessageConsumer consumer = s.createConsumer(q);
            for (int i = 0; i < 3; i++) consumer.receive(5000);
            consumer.close();
        }
        c.close();
    }
}
