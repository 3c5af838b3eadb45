package monitor

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of a Store and of the monitor's server, Numaflow's.
const (
	DefaultDir             = "/var/numaflow/runtime/application-errors"
	DefaultMaxPerContainer = 10
	// Port is the port the monitor serves on (the pod's port named runtime).
	Port = 2470
	// Path is the route of the errors.
	Path = "/runtime/errors"
)

// Entry is one error of a container, as the JSON of its file and of the
// endpoint.
type Entry struct {
	Container string `json:"container"`
	// Timestamp is when it was recorded, in Unix seconds.
	Timestamp int64  `json:"timestamp"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Details   string `json:"details"`
}

// Response is the body of GET /runtime/errors.
type Response struct {
	ErrorMessage *string `json:"errorMessage"`
	Data         []Entry `json:"data"`
}

// Store keeps the errors of a pod's containers as files under a directory
// (see the package's doc). Record and Entries are safe for concurrent use in
// one process.
type Store struct {
	dir string
	max int
	mu  sync.Mutex
	seq int64 // of the next file's name, under mu
}

// NewStore returns the store of dir ("" is DefaultDir) keeping at most max
// files a container (max < 1 is DefaultMaxPerContainer).
func NewStore(dir string, max int) *Store {
	if dir == "" {
		dir = DefaultDir
	}
	if max < 1 {
		max = DefaultMaxPerContainer
	}
	return &Store{dir: dir, max: max}
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// EntryOf returns the entry of err, a user-defined container's gRPC error,
// recorded at now: the container its message names, the code as Numaflow's
// data plane writes it, the message, and the details (the DebugInfo's detail
// when the status carries one).
func EntryOf(err error, now time.Time) Entry {
	st := status.Convert(err)
	e := Entry{Container: containerOf(st.Message()), Timestamp: now.Unix(), Code: codeText(st.Code()), Message: st.Message()}
	for _, d := range st.Details() {
		if di, ok := d.(*errdetails.DebugInfo); ok {
			e.Details = di.GetDetail()
			break
		}
	}
	return e
}

// IsUDFError reports whether err is the error a user-defined container's SDK
// answers with when its handler fails ("UDF_EXECUTION_ERROR(<container>)").
func IsUDFError(err error) bool {
	st, ok := status.FromError(err)
	return ok && err != nil && strings.Contains(st.Message(), "UDF_EXECUTION_ERROR")
}

// Record writes e to the directory of its container, removing the oldest
// files beyond the store's maximum.
func (s *Store) Record(e Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.dir, e.Container)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	files, err := errorFiles(dir)
	if err != nil {
		return err
	}
	for len(files) >= s.max {
		if err := os.Remove(filepath.Join(dir, files[0])); err != nil {
			return fmt.Errorf("monitor: removing the oldest error: %w", err)
		}
		files = files[1:]
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	cur := filepath.Join(dir, "current-numa.json")
	if err := os.WriteFile(cur, b, 0o666); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	// The sequence tells apart the errors of one second, and files left by
	// an earlier process in it.
	var name string
	for {
		name = strconv.FormatInt(e.Timestamp, 10) + "-" + strconv.FormatInt(s.seq, 10) + "-numa.json"
		s.seq++
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err := os.Rename(cur, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	return nil
}

// Entries returns every error recorded under the store's directory; none when
// the directory does not exist. A file that cannot be read or parsed is
// skipped.
func (s *Store) Entries() ([]Entry, error) {
	dirs, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("monitor: reading %s: %w", s.dir, err)
	}
	out := []Entry{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := errorFiles(filepath.Join(s.dir, d.Name()))
		if err != nil {
			continue
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(s.dir, d.Name(), f))
			if err != nil {
				continue
			}
			var e Entry
			if json.Unmarshal(b, &e) == nil {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// Handler serves GET /runtime/errors from s.
func Handler(s *Store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		entries, err := s.Entries()
		resp := Response{Data: entries}
		if err != nil {
			msg := err.Error()
			resp = Response{ErrorMessage: &msg, Data: []Entry{}}
			w.WriteHeader(http.StatusInternalServerError)
		}
		json.NewEncoder(w).Encode(resp)
	})
	return mux
}

// errorFiles lists the error files of a container's directory, oldest first
// (by the timestamp that starts their names, then their sequence); current-numa.json, being
// written, is not one.
func errorFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	var names []string
	for _, d := range des {
		if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), "current") {
			names = append(names, d.Name())
		}
	}
	// <seconds>-<sequence>-numa.json; <seconds>-numa.json has sequence 0.
	key := func(name string) [2]int64 {
		parts := strings.SplitN(name, "-", 3)
		var k [2]int64
		for i := 0; i < 2 && i < len(parts); i++ {
			k[i], _ = strconv.ParseInt(parts[i], 10, 64)
		}
		return k
	}
	slices.SortStableFunc(names, func(a, b string) int {
		ka, kb := key(a), key(b)
		if c := cmp.Compare(ka[0], kb[0]); c != 0 {
			return c
		}
		return cmp.Compare(ka[1], kb[1])
	})
	return names, nil
}

// containerOf is the container an SDK's error message names in its first
// parentheses, "numa" when there are none.
func containerOf(msg string) string {
	if i := strings.IndexByte(msg, '('); i >= 0 {
		if j := strings.IndexByte(msg[i+1:], ')'); j >= 0 && j > 0 {
			if c := msg[i+1 : i+1+j]; !strings.ContainsAny(c, "/\\") && c != "." && c != ".." {
				return c
			}
		}
	}
	return "numa"
}

// codeText is how Numaflow's data plane writes a gRPC code, its description
// ("Internal error"), for the codes a failing UDF answers with; the code's
// name for the others.
func codeText(c codes.Code) string {
	if t, ok := codeTexts[c]; ok {
		return t
	}
	return c.String()
}

var codeTexts = map[codes.Code]string{
	codes.Internal:      "Internal error",
	codes.Unavailable:   "The service is currently unavailable",
	codes.Unimplemented: "Operation is not implemented or not supported",
	codes.OutOfRange:    "Operation was attempted past the valid range",
	codes.DataLoss:      "Unrecoverable data loss or corruption",
}
