// What the unmodified ActiveMQ 5.17 Java client sees of a broker's authentication and
// authorization (tests/differential/test_security_rights.py): each user of the test's
// security setup (tests/securitykit.py) connects and tries each right on queues, topics,
// temporary destinations and advisories. The test runs it against dovecote and ActiveMQ,
// both configured alike, and compares the outputs.
// Usage: java SecurityRights <openwire-port> <name> <user:password>...  (a bare "-" is a
// connection with no user and no password); prints "user.operation: outcome" lines.

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

public class SecurityRights {
    interface Step { String run() throws Exception; }

    static String name;
    static String who;

    static void step(String op, Step s) {
        String outcome;
        try {
            outcome = s.run();
        } catch (Exception e) {
            outcome = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        System.out.println(who + "." + op + ": " + outcome);
    }

    static String send(Session s, Destination d) throws JMSException {
        MessageProducer p = s.createProducer(d);
        p.send(s.createTextMessage("x"));
        p.close();
        return "ok";
    }

    static String sendAnonymously(Session s, Destination d) throws JMSException {
        MessageProducer p = s.createProducer(null);
        p.send(d, s.createTextMessage("x"));
        p.close();
        return "ok";
    }

    static String consume(Session s, Destination d) throws JMSException {
        s.createConsumer(d).close();
        return "ok";
    }

    public static void main(String[] args) throws Exception {
        String url = "tcp://127.0.0.1:" + args[0] + "?jms.sendAcksAsync=false";
        name = args[1];
        for (int i = 2; i < args.length; i++) {
            String user = null, password = null;
            if (!args[i].equals("-")) {
                user = args[i].substring(0, args[i].indexOf(':'));
                password = args[i].substring(args[i].indexOf(':') + 1);
            }
            who = user == null ? "anonymous" : user + (password.endsWith("pw") ? "" : "-bad");
            List<String> async = new CopyOnWriteArrayList<>();
            Connection c = new ActiveMQConnectionFactory(url).createConnection(user, password);
            c.setExceptionListener(e -> async.add(e.getClass().getSimpleName() + ": " + e.getMessage()));
            final Connection conn = c;
            String connected;
            try {
                conn.start();
                connected = "ok";
            } catch (JMSException e) {
                connected = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            System.out.println(who + ".connect: " + connected);
            if (!connected.equals("ok")) {
                try { conn.close(); } catch (JMSException e) { /* refused: nothing to close */ }
                continue;
            }
            Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            String q = "orders." + name;
            String t = "news." + name;
            String u = who.replace('-', '_');
            step("send_queue", () -> send(s, s.createQueue(q + ".existing")));
            step("send_new_queue", () -> send(s, s.createQueue(q + ".new_" + u)));
            step("send_anonymously", () -> sendAnonymously(s, s.createQueue(q + ".existing")));
            step("send_anonymously_new", () -> sendAnonymously(s, s.createQueue(q + ".anon_" + u)));
            step("consume_queue", () -> consume(s, s.createQueue(q + ".existing")));
            step("consume_new_queue", () -> consume(s, s.createQueue(q + ".fresh_" + u)));
            step("browse_queue", () -> {
                QueueBrowser b = s.createBrowser(s.createQueue(q + ".existing"));
                b.getEnumeration().hasMoreElements();
                b.close();
                return "ok";
            });
            step("send_admin_queue", () -> send(s, s.createQueue("admin." + name)));
            step("send_topic", () -> send(s, s.createTopic(t + ".existing")));
            step("consume_topic", () -> consume(s, s.createTopic(t + ".existing")));
            step("consume_new_topic", () -> consume(s, s.createTopic(t + ".fresh_" + u)));
            step("consume_wildcard_topic", () -> consume(s, s.createTopic(t + ".>")));
            step("temp_queue", () -> {
                TemporaryQueue tq = s.createTemporaryQueue();
                String sent = send(s, tq);
                String consumed = consume(s, tq);
                tq.delete();
                return sent + "/" + consumed;
            });
            step("temp_topic", () -> {
                TemporaryTopic tt = s.createTemporaryTopic();
                String consumed = consume(s, tt);
                tt.delete();
                return consumed;
            });
            step("consume_advisory", () -> consume(s, s.createTopic("ActiveMQ.Advisory.Queue")));
            // The advisory consumer the connection made at start (watchTopicAdvisories) is
            // refused asynchronously, if at all: a round trip, then the listener's thread.
            conn.createSession(false, Session.AUTO_ACKNOWLEDGE).close();
            long deadline = System.currentTimeMillis() + 1500;
            while (async.isEmpty() && System.currentTimeMillis() < deadline) Thread.sleep(20);
            System.out.println(who + ".async: " + (async.isEmpty() ? "none" : async.get(0)));
            conn.close();
        }
    }
}
