// What the unmodified ActiveMQ 5.17 Java client sees of a broker's advisories, scenario by
// scenario, for tests/differential/test_advisories.py: it runs against dovecote and against
// a real ActiveMQ, and the test compares the two outputs.
// Usage: java Advisories <openwire-port> <run-id>; prints one "name: outcome" line per
// scenario ("name: ERROR ..." when one throws). Outcomes name no ids, times or hosts: only
// what both brokers must agree on (topic, data structure, its key fields, properties).

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
import org.apache.activemq.advisory.ConsumerEvent;
import org.apache.activemq.advisory.ConsumerEventSource;
import org.apache.activemq.advisory.DestinationSource;
import org.apache.activemq.command.ActiveMQDestination;
import org.apache.activemq.command.ActiveMQMessage;
import org.apache.activemq.command.ActiveMQQueue;
import org.apache.activemq.command.ActiveMQTopic;
import org.apache.activemq.command.ConnectionInfo;
import org.apache.activemq.command.ConsumerInfo;
import org.apache.activemq.command.DataStructure;
import org.apache.activemq.command.DestinationInfo;
import org.apache.activemq.command.ProducerInfo;
import org.apache.activemq.command.RemoveInfo;
import org.apache.activemq.command.RemoveSubscriptionInfo;

public class Advisories {
    static String url;
    static String run;

    interface Scenario { String run() throws Exception; }

    static ActiveMQConnection connect(String options) throws JMSException {
        ActiveMQConnection c = (ActiveMQConnection) new ActiveMQConnectionFactory(url + options)
            .createConnection();
        c.start();
        return c;
    }

    /** Advisories arriving on one topic (or pattern), collected by a listener. */
    static class Watch implements AutoCloseable {
        final ActiveMQConnection c;
        final List<Message> got = new CopyOnWriteArrayList<>();

        Watch(String topic) throws JMSException {
            c = connect("");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            s.createConsumer(new ActiveMQTopic(topic)).setMessageListener(got::add);
        }

        /** What arrived that ``mine`` selects, once ``count`` of them have (or 5 s passed). */
        List<String> await(int count, Mine mine) throws Exception {
            long deadline = System.currentTimeMillis() + 5000;
            List<String> seen = new ArrayList<>();
            while (System.currentTimeMillis() < deadline) {
                seen.clear();
                for (Message m : got) if (mine.test(m)) seen.add(describe(m));
                if (seen.size() >= count) break;
                Thread.sleep(50);
            }
            Thread.sleep(300); // anything more that should not come
            seen.clear();
            for (Message m : got) if (mine.test(m)) seen.add(describe(m));
            got.clear();
            return seen;
        }

        public void close() throws JMSException { c.close(); }
    }

    interface Mine { boolean test(Message m) throws Exception; }

    static DataStructure data(Message m) {
        return ((ActiveMQMessage) m).getDataStructure();
    }

    static boolean names(Message m, String fragment) throws JMSException {
        DataStructure d = data(m);
        String text = d == null ? "" : d.toString();
        return text.contains(fragment) || m.getJMSDestination().toString().contains(fragment);
    }

    /** One advisory as both brokers must show it. */
    static String describe(Message m) throws JMSException {
        ActiveMQMessage am = (ActiveMQMessage) m;
        StringBuilder b = new StringBuilder();
        b.append(((ActiveMQDestination) m.getJMSDestination()).getPhysicalName().replace(run, "R"));
        DataStructure d = am.getDataStructure();
        b.append(" ").append(d == null ? "null" : d.getClass().getSimpleName());
        if (d instanceof ConsumerInfo) {
            ConsumerInfo ci = (ConsumerInfo) d;
            b.append("(").append(name(ci.getDestination())).append(" selector=").append(ci.getSelector())
                .append(" sub=").append(ci.getSubscriptionName());
            // (A durable subscriber's prefetch: the broker's policy turns the client's 1000
            // into 100 on the ConsumerInfo itself.)
            b.append(" prefetch=").append(ci.getPrefetchSize());
            b.append(" noLocal=").append(ci.isNoLocal()).append(")");
        } else if (d instanceof ProducerInfo) {
            b.append("(").append(name(((ProducerInfo) d).getDestination())).append(")");
        } else if (d instanceof ConnectionInfo) {
            ConnectionInfo ci = (ConnectionInfo) d;
            b.append("(client=").append(ci.getClientId().replace(run, "R")).append(" user=")
                .append(ci.getUserName()).append(" password=[").append(ci.getPassword()).append("])");
        } else if (d instanceof RemoveInfo) {
            b.append("(").append(((RemoveInfo) d).getObjectId().getClass().getSimpleName()).append(")");
        } else if (d instanceof RemoveSubscriptionInfo) {
            RemoveSubscriptionInfo ri = (RemoveSubscriptionInfo) d;
            b.append("(").append(ri.getClientId().replace(run, "R")).append("/")
                .append(ri.getSubscriptionName()).append(")");
        } else if (d instanceof DestinationInfo) {
            DestinationInfo di = (DestinationInfo) d;
            b.append("(").append(di.isAddOperation() ? "add " : "remove ")
                .append(di.getDestination().isTemporary() ? "temp" : name(di.getDestination())).append(")");
        } else if (d instanceof Message) {
            ActiveMQMessage payload = (ActiveMQMessage) d;
            b.append("(").append(name(payload.getDestination())).append(" run=")
                .append(payload.getStringProperty("run") != null)
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
            if (p.equals("consumerCount") || p.equals("producerCount")) {
                props.add(p + "=" + v + ":" + v.getClass().getSimpleName());
            } else if (p.equals("originBrokerName")) {
                props.add(p + "=" + v);
            } else if (p.equals("originBrokerURL")) {
                props.add(p + "~" + String.valueOf(v).startsWith("tcp://"));
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

    static String connection() throws Exception {
        String clientId = "adv-conn-" + run;
        try (Watch w = new Watch("ActiveMQ.Advisory.Connection")) {
            ActiveMQConnection c = (ActiveMQConnection) new ActiveMQConnectionFactory(url)
                .createConnection();
            c.setClientID(clientId);
            c.start();
            String id = c.getConnectionInfo().getConnectionId().toString();
            c.close();
            return String.join(" | ", w.await(2, m -> names(m, id) || names(m, clientId)));
        }
    }

    static String consumers(boolean onQueue) throws Exception {
        String q = "adv.cons." + run;
        Destination dest = onQueue ? new ActiveMQQueue(q) : new ActiveMQTopic(q);
        String topic = "ActiveMQ.Advisory.Consumer." + (onQueue ? "Queue." : "Topic.") + q;
        ActiveMQConnection c = connect("");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageConsumer before = s.createConsumer(dest, "x = 1");
        List<String> out = new ArrayList<>();
        try (Watch w = new Watch(topic)) {
            out.add("replayed=" + w.await(1, m -> true));
            MessageConsumer second = s.createConsumer(dest);
            before.close();
            second.close();
            out.add("live=" + w.await(3, m -> true));
        }
        c.close();
        return String.join(" ", out);
    }

    static String durableUnsubscribe() throws Exception {
        String t = "adv.durable." + run;
        try (Watch w = new Watch("ActiveMQ.Advisory.Consumer.Topic." + t)) {
            ActiveMQConnection c = (ActiveMQConnection) new ActiveMQConnectionFactory(url)
                .createConnection();
            c.setClientID("adv-durable-" + run);
            c.start();
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            s.createDurableSubscriber(new ActiveMQTopic(t), "sub1").close();
            s.unsubscribe("sub1");
            c.close();
            return String.join(" | ", w.await(3, m -> true));
        }
    }

    static String producers() throws Exception {
        String q = "adv.prod." + run;
        ActiveMQConnection c = connect("");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer before = s.createProducer(new ActiveMQQueue(q));
        List<String> out = new ArrayList<>();
        try (Watch w = new Watch("ActiveMQ.Advisory.Producer.Queue." + q)) {
            out.add("replayed=" + w.await(1, m -> true));
            MessageProducer anonymous = s.createProducer(null);
            MessageProducer second = s.createProducer(new ActiveMQQueue(q));
            anonymous.close();
            second.close();
            before.close();
            out.add("live=" + w.await(3, m -> true));
        }
        c.close();
        return String.join(" ", out);
    }

    static String destinations() throws Exception {
        String q = "adv.dest." + run;
        ActiveMQConnection c = connect("");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        s.createProducer(new ActiveMQQueue(q + ".old")).send(s.createTextMessage("x"));
        List<String> out = new ArrayList<>();
        try (Watch w = new Watch("ActiveMQ.Advisory.Queue,ActiveMQ.Advisory.Topic")) {
            out.add("replayed=" + w.await(1, m -> names(m, q)));
            s.createProducer(new ActiveMQQueue(q + ".sent")).send(s.createTextMessage("x"));
            s.createConsumer(new ActiveMQTopic(q + ".consumed")).close();
            s.createProducer(new ActiveMQQueue(q + ".produced")).close();
            c.destroyDestination(new ActiveMQQueue(q + ".sent"));
            out.add("live=" + w.await(4, m -> names(m, q)));
        }
        c.close();
        return String.join(" ", out);
    }

    static String temporary() throws Exception {
        ActiveMQConnection c = connect("");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        try (Watch w = new Watch("ActiveMQ.Advisory.TempQueue,ActiveMQ.Advisory.TempTopic")) {
            TemporaryQueue tq = s.createTemporaryQueue();
            TemporaryTopic tt = s.createTemporaryTopic();
            String qn = tq.getQueueName(), tn = tt.getTopicName();
            tq.delete();
            c.close();
            return String.join(" | ", w.await(4, m -> names(m, qn) || names(m, tn)));
        }
    }

    static String expired() throws Exception {
        String q = "adv.exp." + run;
        try (Watch w = new Watch("ActiveMQ.Advisory.Expired.Queue." + q + ",ActiveMQ.Advisory.MessageDLQd.Queue." + q)) {
            ActiveMQConnection c = connect("");
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer p = s.createProducer(new ActiveMQQueue(q));
            p.setTimeToLive(100);
            TextMessage m = s.createTextMessage("gone");
            m.setStringProperty("run", run);
            p.send(m);
            Thread.sleep(400);
            Message got = s.createConsumer(new ActiveMQQueue(q)).receive(1000);
            c.close();
            List<String> seen = w.await(2, x -> true);
            seen.sort(null);
            return "received=" + (got != null) + " " + String.join(" | ", seen);
        }
    }

    static String deadLettered() throws Exception {
        String q = "adv.dlq." + run;
        try (Watch w = new Watch("ActiveMQ.Advisory.MessageDLQd.Queue." + q)) {
            ActiveMQConnection c = connect("?jms.redeliveryPolicy.maximumRedeliveries=0");
            Session s = c.createSession(true, Session.SESSION_TRANSACTED);
            TextMessage m = s.createTextMessage("poison");
            m.setStringProperty("run", run);
            s.createProducer(new ActiveMQQueue(q)).send(m);
            s.commit();
            MessageConsumer consumer = s.createConsumer(new ActiveMQQueue(q));
            Message got = consumer.receive(2000);
            s.rollback();
            Message again = consumer.receive(500);
            c.close();
            return "received=" + (got != null) + " again=" + (again != null) + " "
                + String.join(" | ", w.await(1, x -> true));
        }
    }

    static String destinationSource() throws Exception {
        String q = "adv.source." + run;
        ActiveMQConnection c = connect("");
        DestinationSource source = c.getDestinationSource();
        source.start();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        s.createProducer(new ActiveMQQueue(q)).send(s.createTextMessage("x"));
        TemporaryQueue temp = s.createTemporaryQueue();
        boolean seen = waitFor(() -> source.getQueues().contains(new ActiveMQQueue(q)));
        boolean tempSeen = waitFor(() -> source.getTemporaryQueues().contains(temp));
        c.destroyDestination(new ActiveMQQueue(q));
        boolean gone = waitFor(() -> !source.getQueues().contains(new ActiveMQQueue(q)));
        c.close();
        return "listed=" + seen + " temp=" + tempSeen + " gone=" + gone;
    }

    static String consumerEvents() throws Exception {
        String q = "adv.events." + run;
        ActiveMQConnection c = connect("");
        List<String> events = new CopyOnWriteArrayList<>();
        ConsumerEventSource source = new ConsumerEventSource(c, new ActiveMQQueue(q));
        source.setConsumerListener((ConsumerEvent e) ->
            events.add((e.isStarted() ? "started:" : "stopped:") + e.getConsumerCount()));
        source.start();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageConsumer a = s.createConsumer(new ActiveMQQueue(q));
        MessageConsumer b = s.createConsumer(new ActiveMQQueue(q));
        a.close();
        b.close();
        waitFor(() -> events.size() >= 4);
        source.stop();
        c.close();
        return String.join(",", events);
    }

    interface Condition { boolean holds() throws Exception; }

    static boolean waitFor(Condition condition) throws Exception {
        long deadline = System.currentTimeMillis() + 5000;
        while (System.currentTimeMillis() < deadline) {
            if (condition.holds()) return true;
            Thread.sleep(50);
        }
        return condition.holds();
    }

    public static void main(String[] args) throws Exception {
        url = "tcp://127.0.0.1:" + args[0];
        run = args[1];
        Map<String, Scenario> scenarios = new TreeMap<>();
        scenarios.put("connection", Advisories::connection);
        scenarios.put("queue_consumers", () -> consumers(true));
        scenarios.put("topic_consumers", () -> consumers(false));
        scenarios.put("producers", Advisories::producers);
        scenarios.put("durable_unsubscribe", Advisories::durableUnsubscribe);
        scenarios.put("destinations", Advisories::destinations);
        scenarios.put("temporary", Advisories::temporary);
        scenarios.put("expired", Advisories::expired);
        scenarios.put("dead_lettered", Advisories::deadLettered);
        scenarios.put("destination_source", Advisories::destinationSource);
        scenarios.put("consumer_events", Advisories::consumerEvents);
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
