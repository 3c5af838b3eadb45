// Package faultproxy is a TCP proxy for tests that breaks the network between
// a client and a server on demand: it resets connections, swallows bytes or
// delays them, the way a dead or slow network path does, while both programs
// run unchanged.
//
// # Forwarding
//
// [Start] listens on a free port of 127.0.0.1 and forwards every connection
// it accepts to one target host:port, byte for byte, both ways. A client
// connects to [Proxy.Addr] instead of the server. Each accepted connection
// dials the target; when the target does not answer, the client's connection
// is reset. A FIN from either side is passed on once the bytes before it are
// delivered, and a reset from either side resets the other. [New] starts a
// proxy for a test and closes it when the test finishes; [Proxy.Close] resets
// every connection and waits for every goroutine of the proxy.
//
// # Faults
//
// A fault applies at once, to the open connections and to new ones, and
// lasts until [Proxy.Heal]. A [Direction] names the way bytes travel:
// [ToServer] (requests), [ToClient] (replies) or [Both].
//
//   - [Proxy.Cut] resets every open connection on both sides and resets each
//     new one as soon as it is accepted.
//   - [Proxy.Blackhole] reads the bytes of a direction and drops them.
//     Connections stay open and new ones are accepted ("accept and never
//     answer").
//   - [Proxy.Delay] delivers the bytes of a direction late, in order.
//   - [Proxy.Heal] ends every fault for the bytes and connections that follow.
//     Bytes a black hole swallowed stay lost, as on a real network.
//
// # What a client sees
//
// Under Cut, a request in flight and the next read or write on an open
// connection fail at once with "connection reset by peer" (ECONNRESET; a
// write may report EPIPE, "broken pipe"). A new connection is reset as soon as
// the proxy accepts it: connecting may succeed, since the kernel completes the
// handshake first, and the first request then fails the same way, or connecting
// itself fails with the reset. Nothing waits for a timeout. A client library
// that checks its sockets with reads of its own may take the reset there and
// report the failure as EOF: go-redis reports io.EOF for a command in flight
// and io.EOF or "broken pipe" for the next ones.
//
// Under Blackhole(ToServer), writes succeed but the server never sees the
// requests: every request waits until the client's read timeout or context
// deadline (an error whose Timeout() is true, os.ErrDeadlineExceeded or
// context.DeadlineExceeded). Under Blackhole(ToClient) the server receives
// and executes the requests, so their effects (an INCR, a script) happen,
// but the replies never arrive and the client times out the same way. In
// both cases the connection is neither closed nor reset by the proxy; a
// client that gives up on it and closes it is heard by the server.
//
// Under Delay(dir, d), a round trip takes at least d longer for each delayed
// direction (2d for Both), and timeouts shorter than that fire. The proxy
// holds at most 64 reads (of up to 32 KiB each) per connection and
// direction, so a delayed direction carries at most that much per d.
//
// # Counters
//
// [Proxy.Conns] counts the open proxied connections, [Proxy.Forwarded] and
// [Proxy.Swallowed] the bytes delivered and dropped in each direction, and
// [Proxy.Refused] the connections reset on arrival under Cut. Tests wait on
// them instead of sleeping: a black hole has swallowed a request once
// Swallowed(ToServer) grows.
//
// # Time
//
// The proxy works on real sockets, so delays run on the real clock; tests
// that need a fake clock inject it into the code under test, not here.
package faultproxy
