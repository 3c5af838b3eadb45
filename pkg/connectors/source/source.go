// Package source holds the built-in sources — generator, http, nats (core
// NATS, at most once), and jetstream (a JetStream stream, at
// least once). Every source is an [isb.Reader]. Kafka's source is in
// pkg/connectors/kafka, SQS's in pkg/connectors/sqs, and the user-defined source, reached over gRPC,
// in pkg/udf/sourceclient.
package source
