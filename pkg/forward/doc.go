// Package forward is the forwarder loop that every vertex runs: acquire tokens,
// read at most that many messages, give back the unused tokens, apply the UDF,
// write, and ack only after the write is durable.
package forward
