// One side of a STOMP <-> OpenWire exchange, for tests/integration/test_interop.py.
// java Interop send <port> <queue> <text>   : a TextMessage with property color=red
// java Interop bytes <port> <queue>         : a BytesMessage of bytes 0..9
// java Interop receive <port> <queue>       : prints "<class> <text or hex> color=<property>"
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

public class Interop {
    public static void main(String[] a) throws Exception {
        Connection c = new ActiveMQConnectionFactory("tcp://127.0.0.1:" + a[1]).createConnection();
        c.start();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue(a[2]);
        if (a[0].equals("send")) {
            TextMessage m = s.createTextMessage(a[3]);
            m.setStringProperty("color", "red");
            m.setJMSCorrelationID("corr-1");
            s.createProducer(q).send(m);
        } else if (a[0].equals("bytes")) {
            BytesMessage m = s.createBytesMessage();
            m.writeBytes(new byte[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
            s.createProducer(q).send(m);
        } else {
            Message m = s.createConsumer(q).receive(10000);
            if (m instanceof TextMessage) {
                System.out.println("TextMessage " + ((TextMessage) m).getText() + " color=" + m.getStringProperty("color"));
            } else if (m instanceof BytesMessage) {
                BytesMessage b = (BytesMessage) m;
                byte[] data = new byte[(int) b.getBodyLength()];
                b.readBytes(data);
                StringBuilder hex = new StringBuilder();
                for (byte x : data) hex.append(String.format("%02x", x));
                System.out.println("BytesMessage " + hex + " color=" + m.getStringProperty("color"));
            } else {
                System.out.println("other " + m);
            }
        }
        c.close();
    }
}
