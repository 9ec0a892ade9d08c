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

    /** A line as JSON; null when it is not JSON. */
    static JsonNode read(String line) {
        try {
            return MAPPER.readTree(line);
        } catch (Exception e) {
            return null;
        }
    }

    /** An instant line: an object with exactly "datetime" (a string) and "value"; else a JobError. */
    static ObjectNode instant(String line, String shape) {
        return instant(read(line), line, shape);
    }

    /** The same, for a line already read as JSON (null when it is not JSON). */
    static ObjectNode instant(JsonNode node, String line, String shape) {
        if (node == null || !node.isObject() || node.size() != 2 || !node.path("datetime").isTextual()
                || !node.has("value")) {
            throw new JobError("not a JSON instant " + shape + ": "
                    + LiftedOperation.quote(line), false);
        }
        return (ObjectNode) node;
    }

    /** The datetime of a watermark line, {"watermark":"..."}; null when the line is something else. */
    static String watermark(JsonNode node) {
        if (node != null && node.isObject() && node.size() == 1 && node.path("watermark").isTextual()) {
            return node.get("watermark").asText();
        }
        return null;
    }

    /** A transformed instant: the datetime as it came, the result. */
    static String event(JsonNode datetime, double value) {
        ObjectNode e = MAPPER.createObjectNode();
        e.set("datetime", datetime);
        e.put("value", value);
        return e.toString();
    }
}
