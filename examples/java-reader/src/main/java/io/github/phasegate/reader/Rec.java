package io.github.phasegate.reader;

import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * One record of an output partition as a reader is fed it: a null key is null, an empty key an
 * empty array; a null header value is an empty one.
 */
record Rec(long offset, byte[] key, byte[] value, List<Header> headers) {
  /** One record header. */
  record Header(byte[] key, byte[] value) {
    Header {
      value = value == null ? new byte[0] : value;
    }

    Header(String key, byte[] value) {
      this(key.getBytes(StandardCharsets.UTF_8), value);
    }
  }
}
