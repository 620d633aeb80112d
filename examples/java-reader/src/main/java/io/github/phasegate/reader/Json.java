package io.github.phasegate.reader;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.AbstractMap.SimpleImmutableEntry;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A JSON value as the Go package markers walks it: numbers stay as written ({@link Num}) and
 * objects keep every member in order, repeats included ({@link Obj}), so that the field rules of
 * MARKERS.md (a field given twice, an integer written with a fraction) are Go's. The whole value
 * is read before any field is looked at, as Go checks {@code json.Valid} first.
 */
final class Json {
  // No limit on a number's length (Jackson's default is 1000 digits), as in Go: a "v" of any
  // length above 2 is a newer version (MARKERS.md 3.3), not invalid JSON.
  private static final JsonFactory FACTORY = JsonFactory.builder()
      .streamReadConstraints(StreamReadConstraints.builder().maxNumberLength(Integer.MAX_VALUE).build())
      .build();

  /** JSON null. */
  static final Object NULL = new Object();

  /** A JSON number as written. */
  record Num(String text) {}

  /** A JSON object: its members in order. */
  static final class Obj extends ArrayList<Map.Entry<String, Object>> {}

  /** Not valid JSON. */
  static final class Invalid extends Exception {
    Invalid(String why) {
      super(why);
    }
  }

  private Json() {}

  /**
   * Parses b (null is invalid). Invalid UTF-8 becomes U+FFFD, as Go's decoder makes it; a byte
   * order mark is invalid, as in Go.
   */
  static Object parse(byte[] b) throws Invalid {
    if (b == null) {
      throw new Invalid("null");
    }
    String s = new String(b, StandardCharsets.UTF_8);
    if (s.startsWith("\uFEFF")) {
      throw new Invalid("byte order mark");
    }
    try (JsonParser p = FACTORY.createParser(s)) {
      JsonToken t = p.nextToken();
      if (t == null) {
        throw new Invalid("empty");
      }
      Object v = value(p, t);
      if (p.nextToken() != null) {
        throw new Invalid("data after the value");
      }
      return v;
    } catch (IOException | RuntimeException e) {
      throw new Invalid(e.getMessage());
    }
  }

  private static Object value(JsonParser p, JsonToken t) throws IOException {
    switch (t) {
      case START_OBJECT: {
        Obj o = new Obj();
        for (JsonToken n = p.nextToken(); n != JsonToken.END_OBJECT; n = p.nextToken()) {
          String name = p.currentName();
          o.add(new SimpleImmutableEntry<>(name, value(p, p.nextToken())));
        }
        return o;
      }
      case START_ARRAY: {
        List<Object> a = new ArrayList<>();
        for (JsonToken n = p.nextToken(); n != JsonToken.END_ARRAY; n = p.nextToken()) {
          a.add(value(p, n));
        }
        return a;
      }
      case VALUE_STRING:
        return p.getText();
      case VALUE_NUMBER_INT:
      case VALUE_NUMBER_FLOAT:
        return new Num(p.getText());
      case VALUE_TRUE:
        return Boolean.TRUE;
      case VALUE_FALSE:
        return Boolean.FALSE;
      case VALUE_NULL:
        return NULL;
      default:
        throw new IOException("unexpected " + t);
    }
  }

  /** The JSON type of v, for error messages (Go's kindOf). */
  static String kindOf(Object v) {
    if (v instanceof Num) {
      return "a number";
    }
    if (v instanceof String) {
      return "a string";
    }
    if (v instanceof Obj) {
      return "an object";
    }
    if (v instanceof List) {
      return "an array";
    }
    if (v instanceof Boolean) {
      return "a boolean";
    }
    return "null";
  }

  /** v as a JSON string literal, for messages. */
  static String quote(String v) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : v.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }
}
