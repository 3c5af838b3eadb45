// Package udf applies map functions to messages: the built-ins (cat, filter) and
// user-defined functions reached over gRPC with Numaflow's wire protocol.
package udf
