// Package examples holds user-defined functions written with sluice's SDK,
// each a main package to copy as a starting point:
//
//   - evenodd (mapper): routes integers to "even" or "odd" keys and tags and
//     drops anything else;
//   - flatmap (mapper): splits comma-separated payloads into one message per
//     part;
//   - logsink (sinker): prints payloads, and fails or falls back on request;
//   - simplesource (sourcer): an in-memory, at-least-once counter source;
//   - eventtime (sourcetransformer): takes event times from a JSON field and
//     drops marked messages.
//
// Each one listens in SLUICE_UDS_DIR when set (`vertex run --spawn` sets it),
// else in /var/run/numaflow.
package examples
