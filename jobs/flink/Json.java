// JSON for the mfstream Flink job, with the Jackson that flink-dist shades:
// strict (a repeated key, NaN or a trailing token is an error).

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.DeserializationFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

final class Json {
    private Json() {}

    static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    /** An instant line: an object with exactly "datetime" (a string) and "value"; else a JobError. */
    static ObjectNode instant(String line, String shape) {
        JsonNode node;
        try {
            node = MAPPER.readTree(line);
        } catch (Exception e) {
            node = null;
        }
        if (node == null || !node.isObject() || node.size() != 2 || !node.path("datetime").isTextual()
                || !node.has("value")) {
            throw new JobError("not a JSON instant " + shape + ": "
                    + LiftedOperation.quote(line), false);
        }
        return (ObjectNode) node;
    }

    /** A transformed instant: the datetime as it came, the result. */
    static String event(JsonNode datetime, double value) {
        ObjectNode e = MAPPER.createObjectNode();
        e.set("datetime", datetime);
        e.put("value", value);
        return e.toString();
    }
}
