// Package examples holds user-defined functions written with sluice's SDK,
// each a main package to copy as a starting point:
//
//   - evenodd (mapper): routes integers to "even" or "odd" keys and tags and
//     drops anything else;
//   - flatmap (mapper): splits comma-separated payloads into one message per
//     part;
//   - cat (mapper), batchcat (batchmapper) and streamcat (mapstreamer):
//     pass every message on unchanged;
//   - slowcat (mapper): passes every message on after SLOWCAT_DELAY
//     (default 10ms), as a function calling a slow service would;
//   - nackmap (mapper): passes every message on, with its user metadata,
//     after nacking each payload once (NACKMAP_DELAY sets the nack's delay);
//   - failmap (mapper): passes every message on, with its user metadata,
//     after failing each payload FAILMAP_FAILS (default 2) times, so that
//     the runtime retries it as udf.retryStrategy says;
//   - logsink (sinker): prints payloads, and fails or falls back on request;
//   - nacksink (sinker): prints payloads, after nacking each odd integer
//     once;
//   - simplesource (sourcer): an in-memory, at-least-once counter source
//     that honours the delay of a nack;
//   - eventtime (sourcetransformer): takes event times from a JSON field and
//     drops marked messages;
//   - counter (reducer): counts the messages of each window and keys;
//   - sum (reducer): adds up the integer payloads of each window and keys;
//   - streamcounter (reducestreamer): counts the messages of each window
//     and keys, sending the count every STREAMCOUNTER_EVERY (default 10)
//     messages while the window is open, and the rest when it ends;
//   - sessioncounter (sessionreducer): counts the messages of each session
//     and keys, merged sessions adding up their counts;
//   - sessionsum (sessionreducer): adds up the integer payloads of each
//     session and keys;
//   - streamsorter (accumulator): emits each key set's messages in
//     event-time order as the watermark passes them;
//   - ticker (sideinput): a side input whose value counts its retrievals;
//   - sitag (mapper): appends a side input's value (SITAG_SIDE_INPUT,
//     default ticker) to every payload, read from its file.
//
// Each one listens in SLUICE_UDS_DIR when set (`vertex run --spawn` sets it),
// else in /var/run/numaflow.
package examples
