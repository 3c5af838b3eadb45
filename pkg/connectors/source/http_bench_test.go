package source_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/sluiceflow/sluice/pkg/connectors/source"
)

// BenchmarkHTTPPost posts one message a time to a source that a forwarder
// reads and acks, over HTTPS and plain HTTP: on a connection kept alive, and
// on a new connection for every post (with HTTPS, a TLS handshake each), of
// a small body and of a 64 KiB one.
//
//	go test -run '^$' -bench BenchmarkHTTPPost -benchtime 2000x ./pkg/connectors/source/
func BenchmarkHTTPPost(b *testing.B) {
	for _, scheme := range []struct {
		name  string
		start startFunc
	}{{"https", startHTTP}, {"http", startPlainHTTP}} {
		for _, conn := range []string{"kept-alive", "new-conn"} {
			for _, size := range []int{100, 64 << 10} {
				b.Run(scheme.name+"/"+conn+"/"+sizeName(size), func(b *testing.B) {
					s := scheme.start(b, source.HTTPConfig{})
					forward(b, s)
					tr := s.transport()
					tr.DisableKeepAlives = conn == "new-conn"
					defer tr.CloseIdleConnections()
					client := &http.Client{Transport: tr}
					body := make([]byte, size)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						resp, err := client.Post(s.base+"/vertices/in", "application/octet-stream", bytes.NewReader(body))
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusNoContent {
							b.Fatalf("status %d", resp.StatusCode)
						}
					}
				})
			}
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return "64KiB"
	}
	return "100B"
}
