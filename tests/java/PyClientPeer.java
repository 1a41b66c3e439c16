// The Java client 5.17 on the other side of dovecote's Python client, for
// tests/integration/test_python_client_java.py.
// java PyClientPeer send <port> <queue>    : a MapMessage with typed properties and values,
//                                            in group "g" at sequence 2
// java PyClientPeer receive <port> <queue> : prints the received message's property names
//   (getPropertyNames, sorted) as name=Class:value, then its map entries the same way, then
//   "group=<getGroupID> seq=<getGroupSequence> count=<JMSXDeliveryCount>"
// java PyClientPeer redeliver <port> <queue> : receives in CLIENT mode, recovers, receives
//   again and prints "count=<JMSXDeliveryCount> redelivered=<JMSRedelivered>"
import java.util.*;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQMessage;

public class PyClientPeer {
    static String typed(Object v) {
        return v.getClass().getSimpleName() + ":" + v;
    }

    public static void main(String[] a) throws Exception {
        ActiveMQConnectionFactory f = new ActiveMQConnectionFactory("tcp://127.0.0.1:" + a[1]);
        f.getRedeliveryPolicy().setInitialRedeliveryDelay(0);
        Connection c = f.createConnection();
        c.start();
        boolean client = a[0].equals("redeliver");
        Session s = c.createSession(false, client ? Session.CLIENT_ACKNOWLEDGE : Session.AUTO_ACKNOWLEDGE);
        javax.jms.Queue q = s.createQueue(a[2]);
        if (a[0].equals("send")) {
            MapMessage m = s.createMapMessage();
            m.setIntProperty("i", 7);
            m.setShortProperty("s", (short) -3);
            m.setByteProperty("b", (byte) 5);
            m.setFloatProperty("f", 1.5f);
            m.setLongProperty("l", 1L << 40);
            m.setDoubleProperty("d", 2.25);
            m.setStringProperty("JMSXGroupID", "g");
            m.setIntProperty("JMSXGroupSeq", 2);
            m.setInt("i", 7);
            m.setFloat("f", 1.5f);
            m.setLong("l", 1L << 40);
            s.createProducer(q).send(m);
        } else if (client) {
            MessageConsumer consumer = s.createConsumer(q);
            consumer.receive(10000);
            s.recover();
            Message m = consumer.receive(10000);
            System.out.println("count=" + m.getIntProperty("JMSXDeliveryCount") + " redelivered=" + m.getJMSRedelivered());
            m.acknowledge();
        } else {
            Message m = s.createConsumer(q).receive(10000);
            List<String> names = new ArrayList<>();
            for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) names.add((String) e.nextElement());
            Collections.sort(names);
            List<String> out = new ArrayList<>();
            for (String n : names) out.add(n + "=" + typed(m.getObjectProperty(n)));
            System.out.println(String.join(" ", out));
            out.clear();
            if (m instanceof MapMessage) {
                List<String> keys = new ArrayList<>();
                for (Enumeration<?> e = ((MapMessage) m).getMapNames(); e.hasMoreElements();) keys.add((String) e.nextElement());
                Collections.sort(keys);
                for (String k : keys) out.add(k + "=" + typed(((MapMessage) m).getObject(k)));
            }
            System.out.println(String.join(" ", out));
            ActiveMQMessage am = (ActiveMQMessage) m;
            System.out.println("group=" + am.getGroupID() + " seq=" + am.getGroupSequence() + " count=" + m.getIntProperty("JMSXDeliveryCount"));
        }
        c.close();
    }
}
