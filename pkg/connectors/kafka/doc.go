// Package kafka holds the Kafka source and sink of a vertex, Numaflow's
// built-in `kafka` source and sink: a [Source] reads topics as a member of a
// consumer group and is an isb.Reader; a [Sink] writes a topic and is an
// isb.Writer. Both connect with a [ClientConfig]: brokers, TLS, SASL, and the
// flat librdkafka-style properties of Numaflow's `config` field, parsed by
// [ParseProperties] and checked by [Properties.Check].
//
// # Delivery: at least once
//
// A source never commits an offset by itself (enable.auto.commit may only be
// false). Offsets are committed once the messages are acked: for each
// partition, up to the lowest offset read and not acked yet, so that a message
// held back (being retried, or nacked and delivered again by the forwarder)
// holds back its partition's commit while the messages after it are acked.
// Commits run in the background, one at a time: the acks that come while one is
// in flight go in the next (auto.commit.interval.ms, when set, spaces them).
//
// When a rebalance takes partitions away, the source drops their records
// fetched and not read (the new owner reads them from the committed offset),
// waits up to SourceConfig.RevokeWait (5s) for the messages it read from them
// to be acked, commits what was acked and hands the partitions over. A message
// acked after that is ignored, and read again by the new owner. Close commits
// what was acked and leaves the group. A replica that dies, or closes without
// acking, leaves its messages to be read again. So every message is delivered
// at least once, and once per generation of the group when acks come in time.
//
// # Reading
//
// A Read returns at most len(buf) messages, taken in turn from each partition
// with records fetched (round robin, one at a time, continuing where the last
// Read stopped), so that a busy partition cannot starve the others. It returns
// as soon as it has any. With none fetched it blocks up to
// SourceConfig.ReadTimeout, or until its context is done, and returns 0: it
// never spins. It returns the last error of fetching or of connecting (a
// broker that cannot be reached, a failed authentication) once, instead of a
// nil error, after such a wait. Records are fetched ahead of Read in the
// background, up to SourceConfig.MaxBuffered of them.
//
// A message's ID is "<topic>:<partition>:<offset>"; its only key is the
// record's key (no key when the record's key is empty); its headers are the
// record's (the last value of a repeated header) and [TopicHeader] with the
// topic; its event time is the record's timestamp.
//
// [Source.Pending] is the consumer lag of the partitions the replica owns: each
// one's high watermark less its committed offset (or less where reading starts,
// when the group committed none).
//
// # Writing
//
// A [Sink] produces a batch at once and waits for every record: errs[i] is nil
// once msgs[i] is written, else its own error (a record too large, a topic that
// does not exist, the delivery timeout). A batch the broker refuses for one
// record too large is written again one record at a time, so that only that
// record fails. The producer is idempotent and waits for all in-sync replicas
// unless acks or enable.idempotence say otherwise. As Numaflow's sink does,
// each record has the message's headers and __key_len (the number of keys) and
// __key_0, __key_1... (the keys); with SinkConfig.SetKey, the keys joined with
// ":" are the record's key, so that messages with the same keys keep their
// order in one partition.
//
// # Properties
//
// Source (defaults in brackets): auto.offset.reset (earliest; latest; also
// smallest, beginning, largest, end), session.timeout.ms (45000),
// heartbeat.interval.ms (15000, at most a third of the session timeout),
// max.poll.interval.ms (the rebalance timeout, 60000), fetch.wait.max.ms
// (500), fetch.min.bytes, fetch.max.bytes, max.partition.fetch.bytes,
// partition.assignment.strategy (cooperative-sticky; or range, roundrobin or
// both), group.instance.id (static membership), enable.auto.commit (false
// only), auto.commit.interval.ms (0: commit as soon as acked).
//
// Sink: linger.ms (or queue.buffering.max.ms; a batch is sent as soon as
// Write has queued it), compression.type (or compression.codec: none, gzip,
// snappy, lz4, zstd; none), acks (or request.required.acks: all or -1; 0 or 1
// turn idempotence off), enable.idempotence (true), message.max.bytes (the
// largest record batch, and so record, 1000012), batch.size (the same limit
// when message.max.bytes is not set), message.timeout.ms (or
// delivery.timeout.ms: 5000, 0 for no limit).
//
// Both: client.id (sluice-kafka-source, sluice-kafka-sink),
// request.timeout.ms, security.protocol (plaintext, ssl, sasl_plaintext,
// sasl_ssl). Other properties are not used: [Properties.Unknown] lists them.
//
// # Security
//
// TLS is on when ClientConfig.TLS is set, or when security.protocol is ssl or
// sasl_ssl (the system's roots then verify the brokers). SASL mechanisms:
// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, and OAUTHBEARER with a token from an
// OAuth 2.0 client-credentials grant at an https token endpoint, kept until
// shortly before it expires. GSSAPI (Kerberos) is not supported. A
// security.protocol that contradicts the TLS or SASL given is an error.
// Errors never hold a password or a client secret.
package kafka
