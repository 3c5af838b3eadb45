package config

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// checker collects the problems of a decoded config, and its warnings.
type checker struct {
	problems []Problem
	warnings []Problem
	lines    map[string]int
	nulls    map[string]bool // paths the file gave null, which sets nothing
}

// validate checks f against the schema, then with check, if any; it sets
// f.Warnings and returns the problems.
func (f *File) validate(check Check) []Problem {
	c := &checker{lines: f.lines, nulls: f.nulls}
	if f.MonoVertex != nil {
		c.monoVertex(f.MonoVertex)
	} else {
		c.pipeline(f.Pipeline)
	}
	if check != nil {
		check(f, Reporter{c})
	}
	f.Warnings = c.warnings
	return c.problems
}

// add records a problem at path, with the line of path or of its nearest parent.
func (c *checker) add(path, format string, args ...any) {
	c.problems = append(c.problems, c.problem(path, format, args...))
}

// warn records a warning at path: something the config allows that is
// likely a mistake.
func (c *checker) warn(path, format string, args ...any) {
	c.warnings = append(c.warnings, c.problem(path, format, args...))
}

// problem is what format and args say of path, with the line of path or of
// its nearest parent.
func (c *checker) problem(path, format string, args ...any) Problem {
	line := 0
	for p := path; ; {
		if l, ok := c.lines[p]; ok && l > 0 {
			line = l
			break
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return Problem{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// required reports that path is missing, and that null set nothing when the
// file gave it null.
func (c *checker) required(path string) {
	if c.nulls[path] {
		c.add(path, "is required; null sets nothing")
		return
	}
	c.add(path, "is required")
}

var dns1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func (c *checker) header(apiVersion, name string) {
	if apiVersion != APIVersion {
		c.add("apiVersion", "(%q) must be %s", apiVersion, APIVersion)
	}
	c.name("metadata.name", name)
}

func (c *checker) name(path, name string) {
	switch {
	case name == "":
		c.required(path)
	case len(name) > 63 || !dns1035.MatchString(name):
		c.add(path, "(%q) must be lowercase letters, digits and '-', start with a letter and be at most 63 characters", name)
	}
}

func (c *checker) monoVertex(m *MonoVertex) {
	c.header(m.APIVersion, m.Metadata.Name)
	s := &m.Spec
	if s.Source == nil {
		c.required("spec.source")
	} else {
		c.source("spec.source", s.Source)
	}
	if s.Sink == nil {
		c.required("spec.sink")
	} else {
		c.sink("spec.sink", s.Sink)
	}
	if u := s.UDF; u != nil && u.GroupBy != nil {
		c.add("spec.udf.groupBy", "a MonoVertex has no reduce; run it in a vertex of a Pipeline")
	} else if u != nil {
		c.udf("spec.udf", u)
	}
	if s.Limits != nil {
		c.limits("spec.limits", s.Limits)
	}
	if b := s.Bypass; b != nil {
		c.bypass("spec.bypass", b, s.Sink)
	}
	if s.Replicas != nil && *s.Replicas < 0 {
		c.add("spec.replicas", "(%d) must not be negative", *s.Replicas)
	}
	c.scale("spec.scale", s.Scale)
}

// oneOf checks that exactly one of the named kinds is set, and reports the
// unsupported kinds that are.
func (c *checker) oneOf(path, what string, kinds map[string]bool, unsupported map[string]bool, supported string) {
	var set []string
	for _, k := range sortedKeys(kinds) {
		if kinds[k] {
			set = append(set, k)
		}
	}
	for _, k := range sortedKeys(unsupported) {
		if unsupported[k] {
			c.add(path+"."+k, "the %s %s is not supported by sluice; use %s", k, what, supported)
			set = append(set, k)
		}
	}
	switch {
	case len(set) == 0:
		var nulls []string
		for _, k := range sortedKeys(kinds) {
			if c.nulls[path+"."+k] {
				nulls = append(nulls, k)
			}
		}
		if len(nulls) > 0 {
			c.add(path, "set one %s: %s; %s: null sets nothing (write %s: {})", what, supported, strings.Join(nulls, " and "), nulls[0])
			return
		}
		c.add(path, "set one %s: %s", what, supported)
	case len(set) > 1:
		c.add(path, "sets %s; set exactly one %s", strings.Join(set, " and "), what)
	}
}

func (c *checker) source(path string, s *Source) {
	c.oneOf(path, "source", map[string]bool{"generator": s.Generator != nil, "http": s.HTTP != nil, "udsource": s.UDSource != nil,
		"kafka": s.Kafka != nil, "nats": s.Nats != nil, "jetstream": s.JetStream != nil, "sqs": s.SQS != nil},
		map[string]bool{"serving": s.Serving.IsSet(), "pulsar": s.Pulsar.IsSet()},
		"generator, http, kafka, nats, jetstream, sqs or udsource")
	if g := s.Generator; g != nil {
		c.generator(path+".generator", g)
	}
	if h := s.HTTP; h != nil {
		if h.Auth != nil && h.Auth.Token != nil {
			c.secret(path+".http.auth.token", h.Auth.Token)
		}
		c.httpSourcePorts(path+".http", h)
		c.httpSourceTLS(path+".http.tls", h.TLS)
		if n := h.MaxQueueBytes; n != nil && *n < MinHTTPMaxQueueBytes {
			c.add(path+".http.maxQueueBytes", "(%d) must be at least %d (bytes)", *n, MinHTTPMaxQueueBytes)
		}
		c.httpSourcePace(path+".http", h)
	}
	if s.UDSource != nil {
		c.udContainer(path+".udsource", s.UDSource)
	}
	if s.Kafka != nil {
		c.kafkaSource(path+".kafka", s.Kafka)
	}
	if s.Nats != nil {
		c.natsSource(path+".nats", s.Nats)
	}
	if s.JetStream != nil {
		c.jetStreamSource(path+".jetstream", s.JetStream)
	}
	if s.SQS != nil {
		c.sqsSource(path+".sqs", s.SQS)
	}
	if t := s.Transformer; t != nil {
		c.function(path+".transformer", t.Container, t.Builtin)
		if r := t.RetryStrategy; r != nil {
			c.retry(path+".transformer.retryStrategy", r)
		}
	}
}

func (c *checker) generator(path string, g *Generator) {
	if g.RPU != nil && *g.RPU < 1 {
		c.add(path+".rpu", "(%d) must be at least 1", *g.RPU)
	}
	if g.Duration != nil && g.Duration.Duration <= 0 {
		c.add(path+".duration", "(%v) must be positive", g.Duration.Duration)
	}
	if g.MsgSize != nil && *g.MsgSize < 0 {
		c.add(path+".msgSize", "(%d) must not be negative", *g.MsgSize)
	}
	if g.KeyCount != nil && *g.KeyCount < 0 {
		c.add(path+".keyCount", "(%d) must not be negative", *g.KeyCount)
	}
	if g.Keys != nil {
		switch {
		case len(g.Keys) == 0:
			c.add(path+".keys", "is empty; list the keys, or leave it out for keyCount's")
		case g.KeyCount != nil:
			c.add(path+".keys", "is set beside keyCount; set one")
		}
	}
	if g.Jitter != nil && g.Jitter.Duration < 0 {
		c.add(path+".jitter", "(%v) must not be negative", g.Jitter.Duration)
	}
	if g.ValueBlob != nil {
		if _, err := base64.StdEncoding.DecodeString(*g.ValueBlob); err != nil {
			c.add(path+".valueBlob", "is not base64: %v", err)
		}
	}
}

func (c *checker) port(path string, p *int32) {
	if p != nil && (*p < 1 || *p > 65535) {
		c.add(path, "(%d) must be a port between 1 and 65535", *p)
	}
}

// function checks a transformer or UDF: a container or a built-in. Whether a
// built-in's name and kwargs make a function is the runtime's check.
func (c *checker) function(path string, ctr *Container, b *Builtin) {
	switch {
	case ctr == nil && b == nil:
		c.add(path, "set container or builtin")
	case ctr != nil && b != nil:
		c.add(path, "sets both container and builtin; set one")
	case ctr != nil:
		c.container(path+".container", ctr)
	}
}

func (c *checker) udContainer(path string, u *UDContainer) {
	if u.Container == nil {
		c.required(path + ".container")
		return
	}
	c.container(path+".container", u.Container)
}

// container checks a user-defined container: an image (what Numaflow runs) or a
// command (what `vertex run --spawn` runs locally).
func (c *checker) container(path string, ctr *Container) {
	if ctr.Image == "" && len(ctr.Command) == 0 {
		c.add(path, "needs an image (or a command, for vertex run --spawn)")
	}
	for i, e := range ctr.Env {
		if e.Name == "" {
			c.add(fmt.Sprintf("%s.env[%d].name", path, i), "is required")
		}
	}
	switch ctr.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		c.add(path+".imagePullPolicy", "%q: want Always, IfNotPresent or Never", ctr.ImagePullPolicy)
	}
	for kind, m := range map[string]map[string]string{"limits": ctr.Resources.Limits, "requests": ctr.Resources.Requests} {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if _, err := ParseQuantity(m[name]); err != nil {
				c.add(path+".resources."+kind+"."+name, "%v", err)
			}
		}
	}
}

func (c *checker) udf(path string, u *UDF) {
	c.function(path, u.Container, u.Builtin)
	if r := u.RetryStrategy; r != nil {
		if u.GroupBy != nil {
			c.add(path+".retryStrategy", "is not supported for a reduce (%s.groupBy): a failed window fails the vertex", path)
		} else {
			c.retry(path+".retryStrategy", r)
		}
	}
	if g := u.GroupBy; g != nil {
		c.groupBy(path+".groupBy", g, u.Container != nil)
	}
}

// groupBy checks a reduce's windowing and storage, as Numaflow's controller
// does: one window, fixed, sliding, session or accumulator, with its lengths
// or timeout, and one storage; session windows are keyed.
// container says whether the function is a container: a built-in reduces
// whole windows and cannot stream.
func (c *checker) groupBy(path string, g *GroupBy, container bool) {
	w, wpath := &g.Window, path+".window"
	c.oneOf(wpath, "window", map[string]bool{"fixed": w.Fixed != nil, "sliding": w.Sliding != nil,
		"session": w.Session != nil, "accumulator": w.Accumulator != nil}, nil, "fixed, sliding, session or accumulator")
	if s := w.Session; s != nil {
		c.positive(wpath+".session.timeout", s.Timeout)
		if !g.GetKeyed() {
			c.add(path+".keyed", "must be true with a session window: sessions are per key")
		}
	}
	streaming := func(p string, s *bool) {
		if s != nil && *s && !container {
			c.add(p, "(true) needs a reduce streamer container; a built-in reduces whole windows")
		}
	}
	if f := w.Fixed; f != nil {
		c.positive(wpath+".fixed.length", f.Length)
		streaming(wpath+".fixed.streaming", f.Streaming)
	}
	if sl := w.Sliding; sl != nil {
		c.positive(wpath+".sliding.length", sl.Length)
		c.positive(wpath+".sliding.slide", sl.Slide)
		if sl.Length != nil && sl.Slide != nil && sl.Slide.Duration > sl.Length.Duration {
			c.add(wpath+".sliding.slide", "(%v) must be at most the length (%v)", sl.Slide.Duration, sl.Length.Duration)
		}
		streaming(wpath+".sliding.streaming", sl.Streaming)
	}
	if a := w.Accumulator; a != nil {
		c.accumulator(wpath+".accumulator", a, container)
	}
	if l := g.AllowedLateness; l != nil && l.Duration < 0 {
		c.add(path+".allowedLateness", "(%v) must not be negative", l.Duration)
	}
	const storages = "persistentVolumeClaim, emptyDir or no_store"
	st := g.Storage
	if st == nil {
		if c.nulls[path+".storage"] {
			c.add(path+".storage", "is required (%s); null sets nothing", storages)
			return
		}
		c.add(path+".storage", "is required (%s)", storages)
		return
	}
	c.oneOf(path+".storage", "storage", map[string]bool{"persistentVolumeClaim": st.PersistentVolumeClaim != nil,
		"emptyDir": st.EmptyDir != nil, "no_store": st.NoStore != nil}, nil, storages)
}

// positive checks a required duration that must be above zero.
func (c *checker) positive(path string, d *Duration) {
	switch {
	case d == nil:
		c.add(path, "is required")
	case d.Duration <= 0:
		c.add(path, "(%v) must be positive", d.Duration)
	}
}

func (c *checker) abstractSink(path string, s *AbstractSink) {
	c.oneOf(path, "sink", map[string]bool{"log": s.Log != nil, "blackhole": s.Blackhole != nil, "udsink": s.UDSink != nil,
		"kafka": s.Kafka != nil, "http": s.HTTP != nil, "sqs": s.SQS != nil},
		map[string]bool{"serve": s.Serve.IsSet(), "pulsar": s.Pulsar.IsSet()},
		"log, blackhole, kafka, http, sqs or udsink")
	if s.UDSink != nil {
		c.udContainer(path+".udsink", s.UDSink)
	}
	if s.Kafka != nil {
		c.kafkaSink(path+".kafka", s.Kafka)
	}
	if s.HTTP != nil {
		c.httpSink(path+".http", s.HTTP)
	}
	if s.SQS != nil {
		c.sqsSink(path+".sqs", s.SQS)
	}
}

func (c *checker) sink(path string, s *Sink) {
	c.abstractSink(path, &s.AbstractSink)
	if s.Fallback != nil {
		c.abstractSink(path+".fallback", s.Fallback)
	}
	if s.OnSuccess != nil {
		c.abstractSink(path+".onSuccess", s.OnSuccess)
	}
	if r := s.RetryStrategy; r != nil {
		c.retry(path+".retryStrategy", r)
	}
}

func (c *checker) retry(path string, r *RetryStrategy) {
	if b := r.Backoff; b != nil {
		if b.Interval != nil && b.Interval.Duration <= 0 {
			c.add(path+".backoff.interval", "(%v) must be positive", b.Interval.Duration)
		}
		if b.Steps != nil && *b.Steps == 0 {
			c.add(path+".backoff.steps", "(0) must be at least 1")
		}
		if b.Factor != nil && *b.Factor < 1 {
			c.add(path+".backoff.factor", "(%v) must be at least 1", *b.Factor)
		}
		if b.Jitter != nil && (*b.Jitter < 0 || *b.Jitter >= 1) {
			c.add(path+".backoff.jitter", "(%v) must be at least 0 and below 1", *b.Jitter)
		}
		switch {
		case b.Cap != nil && b.Interval != nil && b.Cap.Duration < b.Interval.Duration:
			c.add(path+".backoff.cap", "(%v) < interval (%v)", b.Cap.Duration, b.Interval.Duration)
		case b.Cap != nil && b.Interval == nil && b.Cap.Duration < DefaultRetryInterval:
			c.add(path+".backoff.cap", "(%v) < the default interval (%v)", b.Cap.Duration, DefaultRetryInterval)
		}
	}
}

func (c *checker) limits(path string, l *Limits) {
	if l.ReadBatchSize != nil && (*l.ReadBatchSize < 1 || *l.ReadBatchSize > MaxReadBatchSize) {
		c.add(path+".readBatchSize", "(%d) must be between 1 and %d", *l.ReadBatchSize, MaxReadBatchSize)
	}
	if l.ReadTimeout != nil && l.ReadTimeout.Duration <= 0 {
		c.add(path+".readTimeout", "(%v) must be positive", l.ReadTimeout.Duration)
	}
	if l.Concurrency != nil && *l.Concurrency < 1 {
		c.add(path+".concurrency", "(0) must be at least 1")
	}
	if l.UDFTimeout != nil && l.UDFTimeout.Duration <= 0 {
		c.add(path+".udfTimeout", "(%v) must be positive", l.UDFTimeout.Duration)
	}
	if l.RateLimit != nil {
		c.rateLimit(path+".rateLimit", l.RateLimit)
	}
}

// MaxReadBatchSize is the largest readBatchSize accepted.
const MaxReadBatchSize = 1_000_000

func (c *checker) rateLimit(path string, r *RateLimit) {
	if r.Max == nil {
		c.required(path + ".max")
	}
	if r.Modes != nil {
		n := 0
		for _, set := range []bool{r.Modes.Scheduled != nil, r.Modes.Relaxed != nil, r.Modes.OnlyIfUsed != nil, r.Modes.GoBackN != nil} {
			if set {
				n++
			}
		}
		if n > 1 {
			c.add(path+".modes", "sets %d modes; set one of scheduled, relaxed, onlyIfUsed or goBackN", n)
		}
	}
	for _, d := range []struct {
		name string
		v    *Duration
	}{{"ttl", r.TTL}, {"staleAfter", r.StaleAfter}, {"syncInterval", r.SyncInterval}} {
		if d.v != nil && d.v.Duration <= 0 {
			c.add(path+"."+d.name, "(%v) must be positive", d.v.Duration)
		}
	}
	if r.SyncInterval != nil && r.StaleAfter != nil && r.SyncInterval.Duration >= r.StaleAfter.Duration {
		c.add(path+".syncInterval", "(%v) must be shorter than staleAfter (%v)", r.SyncInterval.Duration, r.StaleAfter.Duration)
	}
	if r.Store != nil {
		c.store(path+".store", r.Store)
	}
	if r.PerKey != nil {
		c.perKey(path+".perKey", r)
	}
}

func (c *checker) store(path string, s *RateStore) {
	set := 0
	for _, ok := range []bool{s.RedisStore != nil, s.InMemoryStore != nil, s.ReplicaCountStore != nil} {
		if ok {
			set++
		}
	}
	if set > 1 {
		c.add(path, "sets %d stores; set one of redisStore, inMemoryStore or replicaCountStore", set)
	}
	if r := s.RedisStore; r != nil {
		c.redis(path+".redisStore", r)
	}
	if r := s.ReplicaCountStore; r != nil {
		if r.Replicas != nil && *r.Replicas < 1 {
			c.add(path+".replicaCountStore.replicas", "(%d) must be at least 1", *r.Replicas)
		}
	}
}

func (c *checker) redis(path string, r *RedisStore) {
	switch r.Mode {
	case RedisModeSingle:
		if r.URL == nil || *r.URL == "" {
			c.add(path+".url", "is required in single mode")
		} else if u, err := url.Parse(*r.URL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			c.add(path+".url", "(%q) must be redis://host:port[/db] or rediss://host:port[/db]", *r.URL)
		} else {
			c.urlPort(path+".url", *r.URL, u)
		}
		if r.Sentinel != nil {
			c.add(path+".sentinel", "is for sentinel mode; remove it or set mode: sentinel")
		}
		if r.Cluster != nil {
			c.add(path+".cluster", "is for cluster mode; remove it or set mode: cluster")
		}
		if r.RedisAuth != nil {
			c.auth(path+".redisAuth", r.RedisAuth)
		}
	case RedisModeCluster:
		c.redisCluster(path, r)
	case RedisModeSentinel:
		if r.URL != nil {
			c.add(path+".url", "is for single mode; remove it or set mode: single")
		}
		if r.RedisAuth != nil || r.RedisTLS != nil {
			c.add(path, "in sentinel mode, set redisAuth and redisTLS under sentinel")
		}
		if r.Cluster != nil {
			c.add(path+".cluster", "is for cluster mode; remove it or set mode: cluster")
		}
		if r.Sentinel == nil {
			c.add(path+".sentinel", "is required in sentinel mode")
			break
		}
		s := r.Sentinel
		if s.MasterName == "" {
			c.required(path + ".sentinel.masterName")
		}
		if len(s.Endpoints) == 0 {
			c.add(path+".sentinel.endpoints", "needs at least one host:port")
		}
		for i, e := range s.Endpoints {
			c.hostPort(fmt.Sprintf("%s.sentinel.endpoints[%d]", path, i), e)
		}
		for _, a := range []struct {
			name string
			auth *RedisAuth
		}{{"sentinelAuth", s.SentinelAuth}, {"redisAuth", s.RedisAuth}} {
			if a.auth != nil {
				c.auth(path+".sentinel."+a.name, a.auth)
			}
		}
	default:
		c.add(path+".mode", "is required (single, sentinel or cluster)")
	}
	if r.DB != nil && *r.DB < 0 {
		c.add(path+".db", "(%d) must not be negative", *r.DB)
	}
}

// redisCluster checks a redisStore in cluster mode: nodes under cluster.addrs,
// the credentials and TLS of single mode, and no database but 0.
func (c *checker) redisCluster(path string, r *RedisStore) {
	if r.URL != nil {
		c.add(path+".url", "is for single mode; in cluster mode, list the nodes under cluster.addrs")
	}
	if r.Sentinel != nil {
		c.add(path+".sentinel", "is for sentinel mode; remove it or set mode: sentinel")
	}
	if r.DB != nil && *r.DB != 0 {
		c.add(path+".db", "(%d) must be 0 in cluster mode: a Redis Cluster has only database 0", *r.DB)
	}
	if r.RedisAuth != nil {
		c.auth(path+".redisAuth", r.RedisAuth)
	}
	if r.Cluster == nil {
		c.add(path+".cluster", "is required in cluster mode")
		return
	}
	if len(r.Cluster.Addrs) == 0 {
		c.add(path+".cluster.addrs", "needs at least one host:port")
	}
	for i, a := range r.Cluster.Addrs {
		c.hostPort(fmt.Sprintf("%s.cluster.addrs[%d]", path, i), a)
	}
}

func (c *checker) auth(path string, a *RedisAuth) {
	if a.Username != nil {
		c.secret(path+".username", a.Username)
	}
	if a.Password != nil {
		c.secret(path+".password", a.Password)
	}
}

func (c *checker) secret(path string, s *SecretKeySelector) {
	switch {
	case s.File != "" && (s.Name != "" || s.Key != ""):
		c.add(path, "sets file and name/key; set one")
	case s.File == "" && (s.Name == "" || s.Key == ""):
		c.add(path, "needs name and key (a secret under /var/numaflow/secrets) or file")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// accumulator checks an accumulator window: a positive timeout, and a
// container, since a built-in has no accumulator.
func (c *checker) accumulator(path string, a *AccumulatorWindow, container bool) {
	c.positive(path+".timeout", a.Timeout)
	if !container {
		c.add(path, "needs an accumulator container; a built-in reduces whole windows")
	}
}

// bypass checks a MonoVertex's bypass: each condition as an edge's, and a
// fallback or on-success sink for the conditions that lead there.
func (c *checker) bypass(path string, b *Bypass, sink *Sink) {
	if b.Sink != nil {
		c.conditions(path+".sink", b.Sink)
	}
	if b.Fallback != nil {
		c.conditions(path+".fallback", b.Fallback)
		if sink != nil && sink.Fallback == nil {
			c.add(path+".fallback", "needs a fallback sink: set spec.sink.fallback")
		}
	}
	if b.OnSuccess != nil {
		c.conditions(path+".onSuccess", b.OnSuccess)
		if sink != nil && sink.OnSuccess == nil {
			c.add(path+".onSuccess", "needs an on-success sink: set spec.sink.onSuccess")
		}
	}
}
