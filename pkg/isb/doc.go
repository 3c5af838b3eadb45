// Package isb defines the inter-step buffer: small batch interfaces to read up to
// n messages, write a batch with a result per message, ack and nak. Its backends
// live in subpackages: memory for one process and jetstream for pipelines across
// machines.
package isb
