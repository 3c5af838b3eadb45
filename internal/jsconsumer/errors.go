package jsconsumer

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

var (
	// ErrNotConnected is matched by errors of calls made while the
	// connection to the server is down and reconnecting: nothing is queued
	// to be sent later. They work again once it is back.
	ErrNotConnected = errors.New("not connected to the NATS server")
	// ErrClosed is returned by calls on a closed Consumer.
	ErrClosed = errors.New("consumer closed")
	// ErrGone is matched by the error of a pull the server ended because
	// the stream or the consumer does not exist (any more).
	ErrGone = errors.New("the stream or the consumer is gone")
	// ErrDecode is matched by the error of a message the Consumer dropped
	// because its DecodeFunc failed, next to the messages read.
	ErrDecode = errors.New("cannot decode message")
)

// ConnErr marks err with [ErrNotConnected] when it comes from the
// connection being down, and returns it unchanged otherwise (nil too, and an
// error marked already).
func ConnErr(err error) error {
	if err == nil || errors.Is(err, ErrNotConnected) {
		return err
	}
	if errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting) {
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	return err
}
