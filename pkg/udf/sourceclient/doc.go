// Package sourceclient is the runtime's side of the source.v1 wire: a
// [Client] reads from a user-defined source on its unix socket, acks and
// nacks what it read, and asks how many messages are pending. It is an
// [isb.Reader], an [isb.Nacker] and an [isb.PartitionReader].
//
// # The wire
//
// Reads and acks each go over a long-lived stream (ReadFn, AckFn) that opens
// with a handshake the server echoes. A read asks for as many records as the
// buffer holds, waiting at most the read timeout, and ends at the server's
// end of transmission; each record's offset, with its partition, is the
// message's handle, and its ID is partition-hex(offset). Nacks (NackFn) and
// the pending count (PendingFn) are unary calls.
//
// # Errors
//
// A read the source says it failed gives an error matching [ErrRead]. More
// records than were asked for give an error matching [udf.ErrProtocol]. A
// call the server does not answer within its deadline (see udf, Clients)
// gives an error matching [udf.ErrDeadline]; a read's deadline comes the read
// timeout after the others'. A read cut short by the end of its context, with
// records already read, returns none and no error: the source delivers what
// is not acked again.
package sourceclient
