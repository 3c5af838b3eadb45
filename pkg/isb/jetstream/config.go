package jetstream

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/enum"
	"github.com/sluiceflow/sluice/internal/jsconsumer"
)

// Storage is where a buffer's stream keeps its messages. The zero value is
// [FileStorage].
type Storage uint8

const (
	// FileStorage keeps messages on the server's disk: they survive a server
	// restart.
	FileStorage Storage = iota
	// MemoryStorage keeps messages in the server's memory: faster, but a
	// server restart loses the stream, its messages and its consumer.
	MemoryStorage
)

var storageNames = [...]string{FileStorage: "file", MemoryStorage: "memory"}

// String returns the storage's name as written in a configuration: file or
// memory.
func (s Storage) String() string { return enum.Name(storageNames[:], s, "Storage") }

// MarshalText returns the storage's name.
func (s Storage) MarshalText() ([]byte, error) { return enum.Marshal(storageNames[:], s, "storage") }

// UnmarshalText parses file or memory and rejects any other name.
func (s *Storage) UnmarshalText(b []byte) error {
	return enum.Parse(s, storageNames[:], b, "storage")
}

func (s Storage) jetstream() jetstream.StorageType {
	if s == MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Defaults applied to zero fields of [Config]; AckWait's is 60s.
const (
	// DefaultDuplicateWindow is how long a stream remembers message ids to
	// drop duplicates.
	DefaultDuplicateWindow = 2 * time.Minute
	// DefaultConnName is the connection name the server shows for clients.
	DefaultConnName = "sluice"
)

// Config says how to reach the NATS server and how buffers are made.
type Config struct {
	// URL is the server's address, e.g. nats://nats.example:4222; several
	// may be given separated by commas.
	URL string
	// User and Password log in with a user name and password.
	User, Password string
	// Token logs in with an authorization token; it excludes User/Password.
	Token string
	// TLS, when not nil, makes the connection use TLS with this
	// configuration.
	TLS *tls.Config
	// Name is the connection name the server shows; "" is DefaultConnName.
	Name string
	// Storage is where CreateBuffer's streams keep messages.
	Storage Storage
	// AckWait is CreateBuffer's consumer ack wait: how long a message read
	// and not acked (nor kept in progress by its reader) waits before it is
	// delivered again. 0 is 60s; else it is at least 100ms.
	AckWait time.Duration
	// DuplicateWindow is CreateBuffer's stream deduplication window; 0 is
	// DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// FrameSize is the most messages a Writer puts in one JetStream message
	// (a frame); 0 or 1 sends each message alone. Frames cut the server's
	// work per message by their size; see the package doc for what they
	// change. Readers read both kinds.
	FrameSize int
	// Logger receives connection events (disconnects, reconnects, async
	// errors) and background failures; nil logs nothing. Secrets are never
	// logged.
	Logger *zap.Logger
}

// validate checks cfg and returns it with defaults applied.
func (cfg Config) validate() (Config, error) {
	switch {
	case strings.TrimSpace(cfg.URL) == "":
		return cfg, fmt.Errorf("%w: url is empty", ErrInvalidConfig)
	case cfg.Token != "" && (cfg.User != "" || cfg.Password != ""):
		return cfg, fmt.Errorf("%w: token and user/password are exclusive", ErrInvalidConfig)
	case cfg.Storage > MemoryStorage:
		return cfg, fmt.Errorf("%w: storage %v", ErrInvalidConfig, cfg.Storage)
	case cfg.AckWait < 0:
		return cfg, fmt.Errorf("%w: ackWait (%v) < 0", ErrInvalidConfig, cfg.AckWait)
	case cfg.AckWait > 0 && cfg.AckWait < jsconsumer.MinAckWait:
		return cfg, fmt.Errorf("%w: ackWait (%v) < %v", ErrInvalidConfig, cfg.AckWait, jsconsumer.MinAckWait)
	case cfg.FrameSize < 0 || cfg.FrameSize > MaxFrameSize:
		return cfg, fmt.Errorf("%w: frameSize (%d) must be 0 to %d", ErrInvalidConfig, cfg.FrameSize, MaxFrameSize)
	case cfg.DuplicateWindow < 0:
		return cfg, fmt.Errorf("%w: duplicateWindow (%v) < 0", ErrInvalidConfig, cfg.DuplicateWindow)
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = jsconsumer.DefaultAckWait
	}
	if cfg.DuplicateWindow == 0 {
		cfg.DuplicateWindow = DefaultDuplicateWindow
	}
	if cfg.Name == "" {
		cfg.Name = DefaultConnName
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg, nil
}

// MaxFrameSize is the largest FrameSize accepted.
const MaxFrameSize = 1000

// redactURL returns urls with any password or token embedded in them
// replaced by "xxxxx", for errors and logs.
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		switch {
		case err != nil:
			if strings.Contains(p, "@") {
				p = "<unparsable url with credentials>"
			}
		case u.User != nil:
			if _, ok := u.User.Password(); ok {
				p = u.Redacted()
			} else {
				u.User = url.User("xxxxx") // a lone user part may be a token
				p = u.String()
			}
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
