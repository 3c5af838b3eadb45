// Command nackmap is a map UDF that passes every message on unchanged, with
// its keys and user metadata, as cat does, except that it negatively
// acknowledges (nacks) each payload the first time it sees it: every message
// is delivered once more and passed on then. It exercises the runtime's
// nack path end to end. It remembers every payload it has seen, in memory
// (which grows with the number of distinct payloads), and writes nothing
// per message.
//
// Environment:
//
//   - NACKMAP_DELAY: how long the runtime is to wait before it delivers a
//     nacked message again, as a Go duration in whole milliseconds, such
//     as 500ms (default: no delay is asked for).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// reason is the reason every nack gives.
const reason = "first delivery of this payload"

func main() {
	opts, err := optionsFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	if err := mapper.NewServer(newNackMap(opts)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// optionsFromEnv returns the options of the nacks, with the delay
// NACKMAP_DELAY asks for.
func optionsFromEnv() (*mapper.NackOptions, error) {
	r := reason
	opts := &mapper.NackOptions{Reason: &r}
	v, ok := os.LookupEnv("NACKMAP_DELAY")
	if !ok || v == "" {
		return opts, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d%time.Millisecond != 0 {
		return nil, fmt.Errorf("NACKMAP_DELAY=%q: want a duration of 0 or more in whole milliseconds, such as 500ms", v)
	}
	ms := uint64(d.Milliseconds())
	opts.Delay = &ms
	return opts, nil
}

// nackMap nacks a payload the first time it sees it and passes it on
// afterwards. It is safe for concurrent use.
type nackMap struct {
	opts *mapper.NackOptions

	mu   sync.Mutex
	seen map[string]struct{}
}

func newNackMap(opts *mapper.NackOptions) *nackMap {
	return &nackMap{opts: opts, seen: make(map[string]struct{})}
}

func (m *nackMap) Map(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	if m.firstSight(d.Value()) {
		return mapper.Messages{mapper.MessageToNack(m.opts)}
	}
	out := mapper.NewMessage(d.Value()).WithKeys(keys).WithUserMetadata(d.UserMetadata())
	return mapper.Messages{out}
}

// firstSight records payload as seen and reports whether it was new.
func (m *nackMap) firstSight(payload []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[string(payload)]; ok {
		return false
	}
	m.seen[string(payload)] = struct{}{}
	return true
}
