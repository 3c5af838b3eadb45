// Package udsconn is the runtime's connection to a user-defined function server
// on a unix socket: it waits for the server's info file, checks that the server
// speaks a protocol sluice understands, dials the socket, and polls IsReady until
// the server takes work. After a failure it connects again the same way, so that
// a server that crashed and restarted is picked up.
package udsconn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/pkg/serverinfo"
)

// IsReady asks a server whether it takes work; each service has its own.
type IsReady func(ctx context.Context, cc *grpc.ClientConn) (bool, error)

// ErrIncompatible is matched by errors for servers sluice cannot talk to.
var ErrIncompatible = errors.New("incompatible UDF server")

// Conn is a connection to one UDF server that reconnects after failures. It is
// safe for concurrent use.
type Conn struct {
	dir      string
	infoFile string
	socket   func(serverinfo.ServerInfo) string // the socket to dial, from the info
	isReady  IsReady
	log      *zap.Logger
	poll     time.Duration

	connecting sync.Mutex // held while a Get connects, so that one connects at a time

	mu     sync.Mutex // guards the fields below; never held while waiting
	cc     *grpc.ClientConn
	info   serverinfo.ServerInfo
	broken error // why the last connection was dropped, nil while connected
	closed bool
}

// New returns a connection, not yet made, to the server of kind in dir. For the
// map kinds, the socket is chosen by the MAP_MODE of the mapper's info file.
func New(dir string, kind serverinfo.Kind, isReady IsReady, log *zap.Logger) *Conn {
	if log == nil {
		log = zap.NewNop()
	}
	c := &Conn{dir: dir, infoFile: kind.InfoFile(), isReady: isReady, log: log.With(zap.String("udf", string(kind))),
		poll: 100 * time.Millisecond, broken: errors.New("not connected yet")}
	c.socket = func(serverinfo.ServerInfo) string { return kind.Socket() }
	if kind.IsMap() {
		c.socket = func(info serverinfo.ServerInfo) string { return info.MapKind().Socket() }
	}
	return c
}

// Get returns the connection and the server's info, connecting first if needed:
// it waits for the info file, checks it (an [ErrIncompatible] error when sluice
// cannot talk to the server), dials, and waits until IsReady says yes, or until
// ctx ends.
func (c *Conn) Get(ctx context.Context) (*grpc.ClientConn, serverinfo.ServerInfo, error) {
	if cc, info, ok, err := c.current(); ok {
		return cc, info, err
	}
	c.connecting.Lock()
	defer c.connecting.Unlock()
	if cc, info, ok, err := c.current(); ok { // another Get connected meanwhile
		return cc, info, err
	}
	infoPath := filepath.Join(c.dir, c.infoFile)
	info, err := serverinfo.Wait(ctx, infoPath, c.poll)
	if err != nil {
		return nil, serverinfo.ServerInfo{}, err
	}
	if err := serverinfo.Check(info); err != nil {
		return nil, serverinfo.ServerInfo{}, fmt.Errorf("%w (%s): %v", ErrIncompatible, infoPath, err)
	}
	sock := filepath.Join(c.dir, c.socket(info))
	cc, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(serverinfo.MaxMessageSize), grpc.MaxCallSendMsgSize(serverinfo.MaxMessageSize)))
	if err != nil {
		return nil, serverinfo.ServerInfo{}, fmt.Errorf("dialing %s: %w", sock, err)
	}
	if err := c.waitReady(ctx, cc); err != nil {
		cc.Close()
		return nil, serverinfo.ServerInfo{}, fmt.Errorf("waiting for %s to be ready: %w", sock, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cc.Close()
		return nil, serverinfo.ServerInfo{}, errors.New("udsconn: closed")
	}
	c.cc, c.info, c.broken = cc, info, nil
	c.mu.Unlock()
	c.log.Info("connected to UDF server", zap.String("socket", sock), zap.String("language", info.Language),
		zap.String("version", info.Version), zap.Any("metadata", info.Metadata))
	return cc, info, nil
}

// current returns the live connection, or ok false when one must be made.
func (c *Conn) current() (*grpc.ClientConn, serverinfo.ServerInfo, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, serverinfo.ServerInfo{}, true, errors.New("udsconn: closed")
	case c.cc != nil:
		return c.cc, c.info, true, nil
	}
	return nil, serverinfo.ServerInfo{}, false, nil
}

func (c *Conn) waitReady(ctx context.Context, cc *grpc.ClientConn) error {
	t := time.NewTicker(c.poll)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := c.isReady(rctx, cc)
		cancel()
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("the server says it is not ready")
			}
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Broken drops the connection after err on it, logging the server's own message
// once; the next Get connects again. Broken with a connection that is already
// dropped only updates the reason.
func (c *Conn) Broken(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc != nil {
		c.log.Warn("UDF server failed; reconnecting", zap.String("error", Message(err)))
		c.cc.Close()
		c.cc = nil
	}
	c.broken = err
}

// Ready returns nil while connected, or why it is not.
func (c *Conn) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return fmt.Errorf("%s: %s", c.infoFile, Message(c.broken))
	}
	return nil
}

// Close closes the connection for good.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cc == nil {
		return nil
	}
	err := c.cc.Close()
	c.cc = nil
	return err
}

// Message returns the text of an error from a UDF server: the gRPC status's own
// message when there is one.
func Message(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String() + ": " + s.Message()
	}
	return err.Error()
}
