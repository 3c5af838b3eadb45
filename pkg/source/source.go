// Package source holds the built-in sources — generator, http, nats (core
// NATS, at most once), jetstream (a JetStream stream, at least once) and sqs
// (an AWS SQS queue, at least once). Every source is an [isb.Reader]. The user-defined source, reached over gRPC, is
// pkg/udf/sourceclient.
package source

// PendingUnknown is what a source's Pending returns when the source cannot
// tell how many messages are pending.
const PendingUnknown int64 = -1
