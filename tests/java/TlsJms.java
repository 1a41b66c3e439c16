// A JMS round trip over a broker URL (ssl:// for tests/integration/test_tls_java.py): send
// <count> TextMessages to <queue>, then receive them; prints "SENT n", then "RECEIVED n
// <first text>" or "FAILED <exception>". The trust store (and a key store, for a client
// certificate) come as the JVM's javax.net.ssl.* properties.
// java TlsJms <url> <queue> <count>
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

public class TlsJms {
    public static void main(String[] a) throws Exception {
        int count = Integer.parseInt(a[2]);
        Connection c = null;
        try {
            c = new ActiveMQConnectionFactory(a[0]).createConnection();
            c.start();
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = s.createQueue(a[1]);
            MessageProducer p = s.createProducer(q);
            for (int i = 0; i < count; i++) {
                p.send(s.createTextMessage("over TLS " + i));
            }
            System.out.println("SENT " + count);
            MessageConsumer consumer = s.createConsumer(q);
            int received = 0;
            String first = null;
            while (received < count) {
                Message m = consumer.receive(10000);
                if (m == null) break;
                if (first == null) first = ((TextMessage) m).getText();
                received++;
            }
            System.out.println("RECEIVED " + received + " " + first);
        } catch (Exception e) {
            Throwable cause = e;
            while (cause.getCause() != null && cause.getCause() != cause) cause = cause.getCause();
            System.out.println("FAILED " + cause.getClass().getName());
        } finally {
            if (c != null) {
                try { c.close(); } catch (Exception ignored) { }
            }
        }
        System.exit(0);
    }
}
