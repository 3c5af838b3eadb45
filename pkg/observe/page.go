package observe

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// page is the status page served on /: one HTML file with its style and
// script inline, which reads /status/live by a relative URL, so that it
// works over HTTP and HTTPS alike and behind a path prefix.
//
//go:embed page/index.html
var page embed.FS

// PageDataPath is the path of the JSON the status page polls.
const PageDataPath = "/status/live"

// handlePage serves the status page on / and data's JSON on PageDataPath:
// ?since=EPOCH (optional, whole Unix seconds of the store clock, 0 or more)
// keeps only the epochs after it. A bad or unknown query parameter is a 400 naming it and its value.
func handlePage(mux *http.ServeMux, data func(since int64) any) {
	mux.HandleFunc("GET "+PageDataPath, func(w http.ResponseWriter, r *http.Request) {
		since, err := parseSince(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var v any = struct{}{}
		if data != nil {
			v = data(since)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(v)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		b, err := page.ReadFile("page/index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	})
}

// parseSince reads the query of PageDataPath: since, an epoch of 0 or more.
func parseSince(q url.Values) (int64, error) {
	for name, vs := range q {
		if name != "since" {
			return 0, fmt.Errorf("%s: unknown query parameter %q (%q); the one known is since", PageDataPath, name, vs[0])
		}
		if len(vs) > 1 {
			return 0, fmt.Errorf("%s: query parameter since given %d times (%q)", PageDataPath, len(vs), vs)
		}
	}
	s := q.Get("since")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: query parameter since (%q) is not an epoch: want whole Unix seconds, 0 or more", PageDataPath, s)
	}
	return n, nil
}
