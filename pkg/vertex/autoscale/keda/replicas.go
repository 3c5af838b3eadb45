package keda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluiceflow/sluice/pkg/vertex"
)

// pendingMetric is the gauge a replica whose source can tell its pending
// count serves on /metrics.
const pendingMetric = "sluice_source_pending"

// report is what one replica serves: its /status and its pending count
// (-1 when its source cannot tell).
type report struct {
	addr    string
	status  vertex.Status
	pending float64
}

// reader reads the replicas of a vertex from their HTTP port (the one that
// serves /status and /metrics).
type reader struct {
	client *http.Client
}

// replicaAddrs resolves the addresses of a vertex's replicas: each host that
// names several IPs (a headless Service) is a replica per IP. A host that
// resolves to nothing is no replica (a Service without endpoints).
func (r *reader) replicaAddrs(ctx context.Context, addrs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, err
		}
		ips := []string{host}
		if net.ParseIP(host) == nil {
			ips, err = net.DefaultResolver.LookupHost(ctx, host)
			var dns *net.DNSError
			if errors.As(err, &dns) && dns.IsNotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		for _, ip := range ips {
			if hp := net.JoinHostPort(ip, port); !seen[hp] {
				seen[hp] = true
				out = append(out, hp)
			}
		}
	}
	return out, nil
}

// read reads every replica at once. It returns the replicas that answered,
// and an error when some address was given and none answered.
func (r *reader) read(ctx context.Context, addrs []string) ([]report, error) {
	hosts, err := r.replicaAddrs(ctx, addrs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	reports := make([]report, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { reports[i], errs[i] = r.readOne(ctx, h) })
	}
	wg.Wait()
	var out []report
	for i := range hosts {
		if errs[i] == nil {
			out = append(out, reports[i])
		}
	}
	if len(out) == 0 && len(hosts) > 0 {
		return nil, fmt.Errorf("%w: no replica answered of %s: %v", ErrUnreachable, strings.Join(hosts, ", "), errors.Join(errs...))
	}
	return out, nil
}

// readOne reads one replica's /status and its pending count on /metrics.
func (r *reader) readOne(ctx context.Context, addr string) (report, error) {
	rep := report{addr: addr, pending: -1}
	body, err := r.get(ctx, "http://"+addr+"/status")
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(body, &rep.status); err != nil {
		return rep, fmt.Errorf("%s/status: %v", addr, err)
	}
	body, err = r.get(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return rep, err
	}
	rep.pending = pendingOf(string(body))
	return rep, nil
}

func (r *reader) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return body, nil
}

// pendingOf returns the sum of the pending gauges in a Prometheus text
// exposition, -1 when there is none, each is -1 (unknown) or the text does
// not parse.
func pendingOf(text string) float64 {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return -1
	}
	sum, known := 0.0, false
	for _, m := range fams[pendingMetric].GetMetric() {
		v := m.GetUntyped().GetValue()
		if m.Gauge != nil {
			v = m.GetGauge().GetValue()
		}
		if v >= 0 {
			sum, known = sum+v, true
		}
	}
	if !known {
		return -1
	}
	return sum
}
