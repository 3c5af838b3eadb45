package udfserver

import (
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Handshake receives the first message of a stream, which must be the
// start-of-transmission handshake (sot reports whether the message carries
// handshake{sot: true}), and answers it with echo. A stream that starts with
// anything else, or ends before its first message, gets InvalidArgument.
func Handshake[Req, Resp any](stream grpc.BidiStreamingServer[Req, Resp], sot func(*Req) bool, echo *Resp) error {
	req, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "stream closed before its handshake")
	}
	if err != nil {
		return err
	}
	if !sot(req) {
		return status.Error(codes.InvalidArgument, "the first message of a stream must be a handshake with sot set")
	}
	return stream.Send(echo)
}

// InvalidRequest is the error for a request that breaks the protocol's
// framing.
func InvalidRequest(msg string) error { return status.Error(codes.InvalidArgument, msg) }
