package udsconn

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/clock"
)

// How a wait that goes on is paced: the server-info file is read again every
// rereadEvery while its socket is not ready, and the wait is logged at
// firstLog, then each time the time waited doubles, at least every maxLogGap.
const (
	rereadEvery = 2 * time.Second
	firstLog    = 5 * time.Second
	maxLogGap   = time.Minute
)

// errInfoChanged says that the server-info file no longer says what the
// connection being made read in it: it is to be made again from the file.
var errInfoChanged = errors.New("the server-info file changed")

// errNotReady is the last answer of a server whose IsReady says no.
var errNotReady = errors.New("the server says it is not ready")

// pacer tells a wait that goes on when to read the server-info file again and
// when to log. The zero value is not usable; call newPacer.
type pacer struct {
	clock      clock.Clock
	start      time.Time
	read, note time.Duration // time waited at which the next read, and log, are due
}

func newPacer(c clock.Clock) *pacer {
	return &pacer{clock: c, start: c.Now(), read: rereadEvery, note: firstLog}
}

// waited is how long the wait has gone on.
func (p *pacer) waited() time.Duration { return p.clock.Now().Sub(p.start) }

// readDue reports whether the file is to be read again now.
func (p *pacer) readDue() bool {
	w := p.waited()
	if w < p.read {
		return false
	}
	p.read = w + rereadEvery
	return true
}

// logDue reports whether the wait is to be logged now.
func (p *pacer) logDue() bool {
	w := p.waited()
	if w < p.note {
		return false
	}
	p.note = w + min(w, maxLogGap)
	return true
}

// waitInfo waits until the server-info file is there and complete, and
// returns what it says; a file that cannot be read for another reason, or
// that is malformed, is an [ErrIncompatible] error at once, which names the
// file and says what is wrong. It logs once, at the start, when the file is
// not there, then as the wait goes on (pacer).
func (c *Conn) waitInfo(ctx context.Context) (serverinfo.ServerInfo, error) {
	c.setWaiting("waiting for the server-info file " + c.infoPath)
	p := newPacer(c.clock)
	for first := true; ; first = false {
		info, err := serverinfo.Read(c.infoPath)
		switch {
		case err == nil:
			return info, nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, serverinfo.ErrIncomplete):
			return serverinfo.ServerInfo{}, fmt.Errorf("%w: %w", ErrIncompatible, err)
		case first && errors.Is(err, fs.ErrNotExist):
			c.log.Info("waiting for the UDF server's server-info file", zap.String("file", c.infoPath))
		case p.logDue():
			c.log.Warn("still waiting for the UDF server's server-info file", zap.String("file", c.infoPath),
				zap.Duration("waited", p.waited()), zap.String("reason", reason(err)))
		}
		if !clock.Sleep(ctx, c.clock, c.poll) {
			return serverinfo.ServerInfo{}, fmt.Errorf("waiting for server-info file %s: %w (last attempt: %v)", c.infoPath, ctx.Err(), err)
		}
	}
}

// reason says briefly why the server-info file is not usable yet.
func reason(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	return err.Error()
}

// waitReady polls IsReady on cc, the connection to the socket that info (read
// from the server-info file) names, until the server says it is ready or ctx
// ends. Meanwhile it reads the file again every rereadEvery: when the file
// no longer says what info says, it logs a warning and returns an error
// matching errInfoChanged. A wait that goes on is logged (pacer).
func (c *Conn) waitReady(ctx context.Context, cc *grpc.ClientConn, info serverinfo.ServerInfo) error {
	sock := c.socketPath(info)
	p := newPacer(c.clock)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := c.isReady(rctx, cc)
		cancel()
		if err == nil && ok {
			return nil
		}
		if err == nil {
			err = errNotReady
		}
		if p.readDue() {
			if changed := c.infoChanged(info, sock, p.waited()); changed {
				return errInfoChanged
			}
		}
		if p.logDue() {
			c.log.Warn("still waiting for the UDF server's socket to be ready; its server-info file, read again, still names it",
				zap.String("file", c.infoPath), zap.String("socket", sock), zap.Duration("waited", p.waited()),
				zap.String("lastAnswer", Message(err)))
		}
		if !clock.Sleep(ctx, c.clock, c.poll) {
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), err)
		}
	}
}

// infoChanged reads the server-info file again and reports, with a warning
// that names the file, sock (the socket waited for, which info names) and
// how long the wait has gone on, whether it no longer says what info says:
// it changed, was removed or cannot be read. A file being written is not a
// change yet.
func (c *Conn) infoChanged(info serverinfo.ServerInfo, sock string, waited time.Duration) bool {
	now, err := serverinfo.Read(c.infoPath)
	fields := []zap.Field{zap.String("file", c.infoPath), zap.String("waitedFor", sock), zap.Duration("waited", waited)}
	switch {
	case errors.Is(err, serverinfo.ErrIncomplete):
		return false
	case errors.Is(err, fs.ErrNotExist):
		c.log.Warn("the server-info file was removed while the socket it named was not ready; waiting for the file again", fields...)
	case err != nil:
		c.log.Warn("the server-info file cannot be read again while the socket it named is not ready", append(fields, zap.Error(err))...)
	case reflect.DeepEqual(now, info):
		return false
	default:
		c.log.Warn("the server-info file changed while the socket it named was not ready; connecting as it says now",
			append(fields, zap.String("socket", c.socketPath(now)), zap.Any("metadata", now.Metadata), zap.String("version", now.Version))...)
	}
	return true
}
