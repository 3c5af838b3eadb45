// Command failmap is a map UDF that passes every message on unchanged, with
// its keys and user metadata, as cat does, except that it fails each payload
// (MessageToFail) the first FAILMAP_FAILS times it sees it: the runtime calls
// it again with the message as the vertex's udf.retryStrategy says, and it
// is passed on at the call after those, unless the strategy dropped it
// first. It exercises the runtime's retries end to end. It remembers how
// often it has seen every payload, in memory (which grows with the number
// of distinct payloads), and writes nothing per message.
//
// Environment:
//
//   - FAILMAP_FAILS: how many calls of each payload fail (default 2).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

func main() {
	fails, err := failsFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	if err := mapper.NewServer(&failMap{fails: fails, seen: map[string]int{}}).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// failsFromEnv returns FAILMAP_FAILS, or 2 when it is not set.
func failsFromEnv() (int, error) {
	v, ok := os.LookupEnv("FAILMAP_FAILS")
	if !ok || v == "" {
		return 2, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("FAILMAP_FAILS=%q: want a whole number, 0 or more", v)
	}
	return n, nil
}

// failMap fails a payload its first fails calls and passes it on after. It
// is safe for concurrent use.
type failMap struct {
	fails int

	mu   sync.Mutex
	seen map[string]int
}

func (m *failMap) Map(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	m.mu.Lock()
	m.seen[string(d.Value())]++
	n := m.seen[string(d.Value())]
	m.mu.Unlock()
	if n <= m.fails {
		return mapper.Messages{mapper.MessageToFail()}
	}
	return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys).WithUserMetadata(d.UserMetadata())}
}
