package jetstream

import "github.com/nats-io/nats.go/jetstream"

// JetStream returns the connection's JetStream context, for what lives
// beside the buffers on the same server, such as watermark buckets.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }
