// What the unmodified ActiveMQ 5.17 Java client observes, scenario by scenario, for the
// differential suite (tests/differential/test_java_observed.py): it runs against dovecote and
// against a real ActiveMQ, and the test compares the two outputs.
// Usage: java Observed <openwire-port> <run-id>; prints one "name: outcome" line per scenario
// ("name: ERROR ..." when one throws).

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

public class Observed {
    static String url;
    static String run;

    interface Scenario { String run() throws Exception; }

    static Connection connect() throws JMSException {
        Connection c = new ActiveMQConnectionFactory(url).createConnection();
        c.start();
        return c;
    }

    // A started connection for try-with-resources (JMS 1.1's Connection is not AutoCloseable).
    static class Open implements AutoCloseable {
        final Connection c = connect();

        Open() throws JMSException {}

        public void close() throws JMSException { c.close(); }
    }

    static void send(Session s, Destination d, int count, String group) throws JMSException {
        MessageProducer p = s.createProducer(d);
        for (int i = 0; i < count; i++) {
            TextMessage m = s.createTextMessage("m" + i);
            m.setStringProperty("run", run);
            if (group != null) m.setStringProperty("JMSXGroupID", group + (i % 4));
            p.send(m);
        }
        p.close();
    }

    static String seen(Message m) throws JMSException {
        return ((TextMessage) m).getText() + ":" + m.getJMSRedelivered() + ":"
            + m.getIntProperty("JMSXDeliveryCount");
    }

    static String drain(Session s, Destination d) throws JMSException {
        MessageConsumer c = s.createConsumer(d);
        List<String> got = new ArrayList<>();
        Message m;
        while ((m = c.receive(1500)) != null) {
            got.add(seen(m));
            m.acknowledge();
        }
        c.close();
        return String.join(",", got);
    }

    public static void main(String[] args) throws Exception {
        url = "tcp://127.0.0.1:" + args[0];
        run = args[1];
        Map<String, Scenario> scenarios = new TreeMap<>();
        scenarios.put("session_close_after_two_of_three", Observed::sessionClose);
        scenarios.put("connection_close_rounds", Observed::connectionCloseRounds);
        scenarios.put("round_robin_sync_sends", Observed::roundRobin);
        scenarios.put("new_groups_shared_out", Observed::groups);
        scenarios.put("slow_topic_subscriber_burst", Observed::slowTopicSubscriber);
        scenarios.put("large_bodies_whole", Observed::largeBodies);
        for (Map.Entry<String, Scenario> s : scenarios.entrySet()) {
            String outcome;
            try {
                outcome = s.getValue().run();
            } catch (Throwable t) {
                outcome = "ERROR " + t.toString().replace('\n', ' ');
            }
            System.out.println(s.getKey() + ": " + outcome);
            System.out.flush();
        }
        System.exit(0);
    }

    // Bodies past a 64 KiB frame's worth (bytes, text beyond ASCII, a map with a large
    // entry), each with a property, then a small one: the Java client gets each whole. (A
    // map's string of 64 KiB or more beyond ASCII comes back changed from ActiveMQ itself.)
    static String largeBodies() throws Exception {
        byte[] bytes = new byte[300 * 1024];
        for (int i = 0; i < bytes.length; i++) bytes[i] = (byte) (i * 31 + i / 251);
        StringBuilder text = new StringBuilder();
        while (text.length() < 100 * 1024) text.append("\u00e9, \uD83D\uDE00 and so on ").append(text.length());
        String big = text.toString();
        String plain = "abcdefgh".repeat(100 * 128);  // (a map's long string: ASCII, see below)
        try (Open o = new Open()) {
            Session s = o.c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = s.createQueue(run + ".large");
            MessageProducer p = s.createProducer(q);
            BytesMessage b = s.createBytesMessage();
            b.writeBytes(bytes);
            TextMessage t = s.createTextMessage(big);
            MapMessage m = s.createMapMessage();
            m.setString("big", plain);
            m.setInt("n", 7);
            int i = 0;
            for (Message each : new Message[] {b, t, m, s.createTextMessage("small")}) {
                each.setIntProperty("i", i++);
                p.send(each);
            }
            MessageConsumer c = s.createConsumer(q);
            List<String> got = new ArrayList<>();
            for (int k = 0; k < 4; k++) {
                Message r = c.receive(5000);
                if (r == null) { got.add("none"); continue; }
                String kind;
                if (r instanceof BytesMessage) {
                    BytesMessage rb = (BytesMessage) r;
                    byte[] back = new byte[(int) rb.getBodyLength()];
                    rb.readBytes(back);
                    kind = "bytes:" + back.length + ":" + java.util.Arrays.equals(back, bytes);
                } else if (r instanceof MapMessage) {
                    MapMessage rm = (MapMessage) r;
                    kind = "map:" + plain.equals(rm.getString("big")) + ":" + rm.getInt("n");
                } else {
                    String back = ((TextMessage) r).getText();
                    kind = "text:" + (back.equals(big) ? "whole" : back);
                }
                got.add(r.getIntProperty("i") + "=" + kind);
            }
            return String.join(",", got);
        }
    }

    // A client-ack session receives two of three prefetched messages and closes: the two it
    // saw come back redelivered, the third as it was.
    static String sessionClose() throws Exception {
        try (Open o = new Open()) {
            Connection c = o.c;
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Queue q = s.createQueue(run + ".session_close");
            send(s, q, 3, null);
            Session reader = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            MessageConsumer consumer = reader.createConsumer(q);
            consumer.receive(5000);
            consumer.receive(5000);
            reader.close();
            return drain(s, q);
        }
    }

    // Ten messages; six times a connection receives one and closes without acking. Only the
    // one message handed out each time counts as delivered. (Six: one more and dovecote's
    // broker-side redelivery limit would take m0 to the DLQ, a difference on purpose.)
    static String connectionCloseRounds() throws Exception {
        String name = run + ".rounds";
        try (Open o = new Open()) {
            Connection c = o.c;
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            send(s, s.createQueue(name), 10, null);
        }
        for (int round = 0; round < 6; round++) {
            Connection c = connect();
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            s.createConsumer(s.createQueue(name)).receive(5000);
            c.close();
        }
        try (Open o = new Open()) {
            Connection c = o.c;
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            MessageConsumer dlq =
                s.createConsumer(s.createQueue("ActiveMQ.DLQ"), "run = '" + run + "'");
            List<String> dead = new ArrayList<>();
            Message m;
            while ((m = dlq.receive(1500)) != null) {
                dead.add(((TextMessage) m).getText());
                m.acknowledge();
            }
            return "dead=" + dead + " left=" + drain(s, s.createQueue(name));
        }
    }

    static String shareOut(String name, String group) throws Exception {
        try (Open o = new Open()) {
            Connection c = o.c;
            Map<String, List<String>> got = new ConcurrentHashMap<>();
            AtomicInteger total = new AtomicInteger();
            Queue q = null;
            for (String who : new String[] {"a", "b"}) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                q = s.createQueue(run + "." + name);
                got.put(who, new ArrayList<>());
                s.createConsumer(q).setMessageListener(m -> {
                    try {
                        String key = group == null ? ((TextMessage) m).getText()
                            : m.getStringProperty("JMSXGroupID");
                        synchronized (got) {
                            if (!got.get(who).contains(key)) got.get(who).add(key);
                        }
                        total.incrementAndGet();
                    } catch (JMSException e) {
                        throw new RuntimeException(e);
                    }
                });
            }
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer p = s.createProducer(q);
            p.setDeliveryMode(DeliveryMode.PERSISTENT);  // a sync send: a dispatch pass each
            int count = group == null ? 20 : 8;
            for (int i = 0; i < count; i++) {
                TextMessage m = s.createTextMessage("m" + i);
                if (group != null) m.setStringProperty("JMSXGroupID", group + (i % 4));
                p.send(m);
            }
            long deadline = System.currentTimeMillis() + 10000;
            while (total.get() < count && System.currentTimeMillis() < deadline) Thread.sleep(20);
            synchronized (got) {
                return "a=" + got.get("a").size() + " b=" + got.get("b").size()
                    + " total=" + total.get();
            }
        }
    }

    // Two waiting consumers, twenty synchronous sends one after another.
    static String roundRobin() throws Exception {
        return shareOut("round_robin", null);
    }

    // Two waiting consumers, four message groups of two messages each: groups per consumer.
    static String groups() throws Exception {
        return shareOut("groups", "g");
    }

    // A topic subscriber with prefetch 5 and a pending limit of 10 that does not read while
    // a burst of 1,000 is sent: its window's worth comes first, then the newest.
    static String slowTopicSubscriber() throws Exception {
        try (Open o = new Open()) {
            Connection c = o.c;
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic t = s.createTopic(run + ".prices"
                + "?consumer.prefetchSize=5&consumer.maximumPendingMessageLimit=10");
            MessageConsumer slow = s.createConsumer(t);
            Session ps = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer p = ps.createProducer(ps.createTopic(run + ".prices"));
            p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            for (int i = 0; i < 1000; i++) p.send(ps.createTextMessage("m" + i));
            // A request after the burst: the broker has taken every send once it answers.
            ps.createConsumer(ps.createQueue(run + ".sync")).close();
            List<String> got = new ArrayList<>();
            Message m;
            while ((m = slow.receive(1500)) != null) got.add(((TextMessage) m).getText());
            return "first=" + got.subList(0, Math.min(5, got.size())) + " last="
                + (got.isEmpty() ? "none" : got.get(got.size() - 1))
                + " at_most_15=" + (got.size() <= 15);
        }
    }
}
