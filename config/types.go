package config

import (
	"errors"
	"regexp"
	"time"
)

// APIVersion is the apiVersion of every object sluice reads.
const APIVersion = "numaflow.numaproj.io/v1alpha1"

// Kinds of object.
const (
	KindMonoVertex = "MonoVertex"
	KindPipeline   = "Pipeline"
)

// K8s is a field that only concerns Kubernetes (pods, containers, scheduling).
// Any content is accepted and ignored; the loader names every such field it met
// in one info log.
type K8s struct{}

// Unsupported is a field of Numaflow's schema for a feature sluice does not run
// (a Kafka source, a reduce). It loads, and validation reports it by path.
type Unsupported struct{ set bool }

// IsSet reports whether the field was present.
func (u Unsupported) IsSet() bool { return u.set }

// Duration is a duration in Go and Kubernetes syntax ("1s", "500ms", "1m30s").
type Duration struct{ time.Duration }

// UnmarshalText parses a duration string with [ParseDuration].
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// ErrDurationRange is matched by the error of a duration that is well written
// but longer than a time.Duration holds: more than MaxDuration either way.
var ErrDurationRange = errors.New("out of range: a duration is at most " + MaxDuration + " either way")

// MaxDuration is the longest duration, as written in a config: about 292
// years (2562047h47m16.854775807s).
const MaxDuration = "2562047h47m16s"

// durationSyntax is Go's duration syntax: an optional sign, then 0 or numbers
// with units.
var durationSyntax = regexp.MustCompile(`^[-+]?(0|((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$`)

// ParseDuration parses a duration as time.ParseDuration does ("1s", "500ms",
// "1m30s"). A duration that is well written but too long for a
// time.Duration gives an error matching [ErrDurationRange]; any other error
// is time.ParseDuration's.
func ParseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil && durationSyntax.MatchString(s) {
		return 0, ErrDurationRange
	}
	return v, err
}

// MarshalText writes a duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Metadata is the object's metadata; sluice uses the name.
type Metadata struct {
	Name         string            `yaml:"name"`
	Namespace    string            `yaml:"namespace"`
	Labels       map[string]string `yaml:"labels"`
	Annotations  map[string]string `yaml:"annotations"`
	GenerateName K8s               `yaml:"generateName"`

	// Written by the Kubernetes API server; present in `kubectl get -o yaml`.
	UID                        K8s `yaml:"uid"`
	ResourceVersion            K8s `yaml:"resourceVersion"`
	Generation                 K8s `yaml:"generation"`
	CreationTimestamp          K8s `yaml:"creationTimestamp"`
	DeletionTimestamp          K8s `yaml:"deletionTimestamp"`
	DeletionGracePeriodSeconds K8s `yaml:"deletionGracePeriodSeconds"`
	Finalizers                 K8s `yaml:"finalizers"`
	OwnerReferences            K8s `yaml:"ownerReferences"`
	ManagedFields              K8s `yaml:"managedFields"`
	SelfLink                   K8s `yaml:"selfLink"`
}

// PodTemplate is Numaflow's AbstractPodTemplate, inlined into vertex specs: all of
// it is Kubernetes-only.
type PodTemplate struct {
	Metadata                     K8s `yaml:"metadata"`
	NodeSelector                 K8s `yaml:"nodeSelector"`
	Tolerations                  K8s `yaml:"tolerations"`
	SecurityContext              K8s `yaml:"securityContext"`
	ImagePullSecrets             K8s `yaml:"imagePullSecrets"`
	PriorityClassName            K8s `yaml:"priorityClassName"`
	Priority                     K8s `yaml:"priority"`
	Affinity                     K8s `yaml:"affinity"`
	ServiceAccountName           K8s `yaml:"serviceAccountName"`
	RuntimeClassName             K8s `yaml:"runtimeClassName"`
	AutomountServiceAccountToken K8s `yaml:"automountServiceAccountToken"`
	DNSPolicy                    K8s `yaml:"dnsPolicy"`
	DNSConfig                    K8s `yaml:"dnsConfig"`
	ResourceClaims               K8s `yaml:"resourceClaims"`
}

// MonoVertex is a source, an optional UDF and a sink in one process.
type MonoVertex struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   Metadata       `yaml:"metadata"`
	Spec       MonoVertexSpec `yaml:"spec"`
	Status     K8s            `yaml:"status"`
}

// MonoVertexSpec is a MonoVertex's spec.
type MonoVertexSpec struct {
	PodTemplate       `yaml:",inline"`
	Replicas          *int32  `yaml:"replicas"`
	Source            *Source `yaml:"source"`
	Sink              *Sink   `yaml:"sink"`
	UDF               *UDF    `yaml:"udf"`
	Limits            *Limits `yaml:"limits"`
	Scale             *Scale  `yaml:"scale"`
	ContainerTemplate K8s     `yaml:"containerTemplate"`
	DaemonTemplate    K8s     `yaml:"daemonTemplate"`
	Volumes           K8s     `yaml:"volumes"`
	InitContainers    K8s     `yaml:"initContainers"`
	Sidecars          K8s     `yaml:"sidecars"`
	UpdateStrategy    K8s     `yaml:"updateStrategy"`
	Lifecycle         K8s     `yaml:"lifecycle"`
	Bypass            *Bypass `yaml:"bypass"`
	// Streaming reads on while earlier messages are mapped, written and
	// acked, with up to limits.concurrency messages in flight, acked out of
	// order (default false: one batch at a time).
	Streaming *bool `yaml:"streaming"`
}

// Limits are a MonoVertex's limits; a pipeline's add the buffer fields.
type Limits struct {
	// ReadBatchSize is the most messages read at once (default 500).
	ReadBatchSize *uint64 `yaml:"readBatchSize"`
	// ReadTimeout is the longest a read waits for messages (default 1s).
	ReadTimeout *Duration  `yaml:"readTimeout"`
	RateLimit   *RateLimit `yaml:"rateLimit"`
	// Concurrency is the most messages in flight, read and not yet acked
	// (default readBatchSize). With streaming it is how many are kept in
	// flight; without, a read takes at most the smaller of it and
	// readBatchSize.
	Concurrency *uint64 `yaml:"concurrency"`

	// sluice's addition.

	// UDFTimeout is how long a call to a user-defined function may go
	// unanswered before it is abandoned and retried (default
	// DefaultUDFTimeout); a source's read has its readTimeout on top.
	UDFTimeout *Duration `yaml:"udfTimeout"`
}

// PipelineLimits are the limits of a pipeline and of its vertices.
type PipelineLimits struct {
	Limits `yaml:",inline"`
	// BufferMaxLength and BufferUsageLimit size the buffers a vertex writes to
	// (defaults DefaultBufferMaxLength and DefaultBufferUsageLimit).
	BufferMaxLength  *uint64 `yaml:"bufferMaxLength"`
	BufferUsageLimit *uint32 `yaml:"bufferUsageLimit"`
}

// Defaults of Numaflow's limits.
const (
	DefaultReadBatchSize    = 500
	DefaultReadTimeout      = time.Second
	DefaultBufferMaxLength  = 30000
	DefaultBufferUsageLimit = 80
	// DefaultUDFTimeout is the default of udfTimeout, sluice's addition.
	DefaultUDFTimeout = 60 * time.Second
)

// limits returns the MonoVertex-level part of l, nil when l is nil.
func (l *PipelineLimits) limits() *Limits {
	if l == nil {
		return nil
	}
	return &l.Limits
}

// GetReadBatchSize returns readBatchSize or its default.
func (l *PipelineLimits) GetReadBatchSize() int { return l.limits().GetReadBatchSize() }

// GetReadTimeout returns readTimeout or its default.
func (l *PipelineLimits) GetReadTimeout() time.Duration { return l.limits().GetReadTimeout() }

// GetUDFTimeout returns udfTimeout or its default.
func (l *PipelineLimits) GetUDFTimeout() time.Duration { return l.limits().GetUDFTimeout() }

// GetRateLimit returns the rate limit, or nil when there is none.
func (l *PipelineLimits) GetRateLimit() *RateLimit { return l.limits().GetRateLimit() }

// GetBufferMaxLength returns bufferMaxLength or its default.
func (l *PipelineLimits) GetBufferMaxLength() int {
	if l == nil || l.BufferMaxLength == nil {
		return DefaultBufferMaxLength
	}
	return int(*l.BufferMaxLength)
}

// GetBufferUsageLimit returns bufferUsageLimit (a percentage) or its default.
func (l *PipelineLimits) GetBufferUsageLimit() int {
	if l == nil || l.BufferUsageLimit == nil {
		return DefaultBufferUsageLimit
	}
	return int(*l.BufferUsageLimit)
}

// GetReadBatchSize returns readBatchSize or its default.
func (l *Limits) GetReadBatchSize() int {
	if l == nil || l.ReadBatchSize == nil {
		return DefaultReadBatchSize
	}
	return int(*l.ReadBatchSize)
}

// GetConcurrency returns concurrency or its default, readBatchSize.
func (l *Limits) GetConcurrency() int {
	if l == nil || l.Concurrency == nil {
		return l.GetReadBatchSize()
	}
	return int(min(*l.Concurrency, 1<<31-1))
}

// GetReadTimeout returns readTimeout or its default.
func (l *Limits) GetReadTimeout() time.Duration {
	if l == nil || l.ReadTimeout == nil {
		return DefaultReadTimeout
	}
	return l.ReadTimeout.Duration
}

// GetUDFTimeout returns udfTimeout or its default.
func (l *Limits) GetUDFTimeout() time.Duration {
	if l == nil || l.UDFTimeout == nil {
		return DefaultUDFTimeout
	}
	return l.UDFTimeout.Duration
}

// GetRateLimit returns the rate limit, or nil when there is none.
func (l *Limits) GetRateLimit() *RateLimit {
	if l == nil {
		return nil
	}
	return l.RateLimit
}

// RateLimit is Numaflow's rateLimit block with sluice's additions.
type RateLimit struct {
	Max            *uint64    `yaml:"max"`
	Min            *uint64    `yaml:"min"`
	RampUpDuration *Duration  `yaml:"rampUpDuration"`
	Store          *RateStore `yaml:"store"`
	Modes          *Modes     `yaml:"modes"`
	ResumedRampUp  *bool      `yaml:"resumedRampUp"`
	TTL            *Duration  `yaml:"ttl"`

	// sluice's additions.

	// ExcludeDropped gives back the tokens of messages the UDF drops (to_drop),
	// so that only messages that go on count against the limit.
	ExcludeDropped *bool `yaml:"excludeDropped"`
	// StaleAfter is how long a replica may miss heartbeats before the store drops
	// it from the replicas (default 2s).
	StaleAfter *Duration `yaml:"staleAfter"`
	// SyncInterval is how often a replica syncs with the store (default 100ms).
	SyncInterval *Duration `yaml:"syncInterval"`
	// OnStoreFailure is what a replica does once the store has been unreachable
	// past its lease: pause or lastKnown (default lastKnown).
	// (a ratelimit.StoreFailurePolicy's name).
	OnStoreFailure *string `yaml:"onStoreFailure"`
	// Pacing spreads each epoch's share over the second in slices of this length
	// (1ms to 500ms) instead of granting it all at the epoch's start.
	Pacing *Duration `yaml:"pacing"`
	// Adaptive turns on closed-loop throttling: a downstream that says it is
	// rate limited cuts the limit of every replica, which then ramps back.
	Adaptive *Adaptive `yaml:"adaptive"`
	// Shadow (sluice's addition) computes the pool, shares and grants as
	// configured but never makes a reader wait: what the limit would have
	// throttled is counted (sluice_ratelimit_shadow_throttled_total, /status,
	// the epoch log) and let through. Default false.
	Shadow *bool `yaml:"shadow"`
	// PerKey (sluice's addition) limits each message key too: see PerKeyLimit.
	PerKey *PerKeyLimit `yaml:"perKey"`
	// Bytes (sluice's addition) limits the payload bytes per second too:
	// see ByteLimit.
	Bytes *ByteLimit `yaml:"bytes"`
	// Cost (sluice's addition) is an expression over a message whose value
	// is the tokens it takes from the message limit (default 1 each), so
	// that max counts cost units: see docs/throttling.md.
	Cost *string `yaml:"cost"`
	// Groups (sluice's addition) are the shared limits the vertex joins:
	// each message passes only when the vertex's limit and every group's
	// allow it. See GroupLimit.
	Groups []GroupLimit `yaml:"groups"`
	// Regions (sluice's addition) splits the limit among the regions of
	// the replicas by proportions, and lets a region use the tokens another
	// leaves unused. See Regions.
	Regions *Regions `yaml:"regions"`
}

// GroupLimit is a shared limit (a resource group): one pool that every
// replica of every vertex that joins it by name shares through the vertex's
// store, beside each vertex's own limit.
type GroupLimit struct {
	// Name names the group in the store: vertices and pipelines that give
	// the same name (and the same store) share it.
	Name string `yaml:"name"`
	// Max, Min, RampUpDuration and Modes are the group's limit, as a
	// rateLimit block's. The store holds one definition: the last member
	// to start or change it sets it for all, from one epoch.
	Max            *uint64   `yaml:"max"`
	Min            *uint64   `yaml:"min"`
	RampUpDuration *Duration `yaml:"rampUpDuration"`
	Modes          *Modes    `yaml:"modes"`
	// ReservePercentage is the part of its share of the group an idle
	// replica keeps when it lends the rest to the group (default 10).
	ReservePercentage *uint32 `yaml:"reservePercentage"`
}

// Regions splits a rate limit among regions.
type Regions struct {
	// Proportions are each region's weight: region r's pool is
	// max * proportions[r] / (the sum of the weights).
	Proportions map[string]uint32 `yaml:"proportions"`
	// ReservePercentage is the part of its share an idle replica keeps when
	// it lends the rest to the other regions (default 10).
	ReservePercentage *uint32 `yaml:"reservePercentage"`
}

// DefaultReservePercentage is the part of its share an idle replica keeps
// when it lends, for groups and regions.
const DefaultReservePercentage = 10

// IsShadow reports whether shadow is on.
func (r *RateLimit) IsShadow() bool { return r != nil && r.Shadow != nil && *r.Shadow }

// Adaptive is sluice's closed-loop throttling of a rateLimit block.
type Adaptive struct {
	// CutPercentage is the share of the pool a throttle signal takes off,
	// 0 to 100 (default 50; 0 only pauses for the Retry-After).
	CutPercentage *uint32 `yaml:"cutPercentage"`
	// HoldBelowPercentage is how far below the learnt ceiling (the rate at
	// which the last cut's signal came) the limit holds, 0 to 100 (default 1;
	// at least one message a second).
	HoldBelowPercentage *uint32 `yaml:"holdBelowPercentage"`
	// ProbeAfter is how long the limit holds below the learnt ceiling after
	// a cut before it probes above it, by little and then by more
	// (default 2s).
	ProbeAfter *Duration `yaml:"probeAfter"`
	// ForgetAfter is how long after the last cut the learnt ceiling is
	// forgotten, so that a quota that rose is found again (default 60s).
	ForgetAfter *Duration `yaml:"forgetAfter"`
	// Signals are the kinds of throttle signal that cut the limit: http429,
	// http503, sinkRateLimited, mapRateLimited (default all of them; the
	// names of isb.SignalKind).
	Signals []string `yaml:"signals"`
}

// RateStore is where the replicas of a vertex share their limit.
type RateStore struct {
	RedisStore    *RedisStore `yaml:"redisStore"`
	InMemoryStore *struct{}   `yaml:"inMemoryStore"`
	// ReplicaCountStore is sluice's store-less distribution: a fixed number of
	// replicas, each taking its rank's share.
	ReplicaCountStore *ReplicaCountStore `yaml:"replicaCountStore"`
}

// RedisStore is a Redis server, a sentinel-managed Redis or a Redis Cluster.
type RedisStore struct {
	// Mode is single, sentinel or cluster; it is required.
	Mode     RedisMode      `yaml:"mode"`
	URL      *string        `yaml:"url"`
	DB       *int32         `yaml:"db"`
	Sentinel *RedisSentinel `yaml:"sentinel"`
	// Cluster is sluice's addition: the nodes of a Redis Cluster, in cluster
	// mode.
	Cluster *RedisCluster `yaml:"cluster"`
	// RedisAuth and RedisTLS are sluice's additions for single and cluster
	// mode: credentials from secrets instead of the URL, and a CA or client
	// certificate for rediss:// URLs (in cluster mode, redisTLS turns TLS on
	// for every node). In sentinel mode they are set under sentinel.
	RedisAuth *RedisAuth `yaml:"redisAuth"`
	RedisTLS  *TLS       `yaml:"redisTLS"`
}

// RedisCluster is a Redis Cluster, sluice's addition.
type RedisCluster struct {
	// Addrs are the host:port of some of its nodes (at least one); the client
	// learns the others from them.
	Addrs []string `yaml:"addrs"`
}

// RedisSentinel is a sentinel deployment.
type RedisSentinel struct {
	MasterName   string     `yaml:"masterName"`
	Endpoints    []string   `yaml:"endpoints"`
	SentinelAuth *RedisAuth `yaml:"sentinelAuth"`
	RedisAuth    *RedisAuth `yaml:"redisAuth"`
	SentinelTLS  *TLS       `yaml:"sentinelTLS"`
	RedisTLS     *TLS       `yaml:"redisTLS"`
}

// RedisAuth is a username and a password, each read from a secret.
type RedisAuth struct {
	Username *SecretKeySelector `yaml:"username"`
	Password *SecretKeySelector `yaml:"password"`
}

// TLS is a client TLS configuration with certificates from secrets.
type TLS struct {
	InsecureSkipVerify bool               `yaml:"insecureSkipVerify"`
	CACertSecret       *SecretKeySelector `yaml:"caCertSecret"`
	CertSecret         *SecretKeySelector `yaml:"certSecret"`
	KeySecret          *SecretKeySelector `yaml:"keySecret"`
}

// SecretKeySelector names a key of a Kubernetes secret, read from
// /var/numaflow/secrets/<name>/<key>. sluice also takes a plain file path.
type SecretKeySelector struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional *bool  `yaml:"optional"`
	// File is sluice's addition: read the secret from this file instead.
	File string `yaml:"file"`
}

// ReplicaCountStore splits the limit among a fixed number of replicas.
type ReplicaCountStore struct {
	Replicas *int32 `yaml:"replicas"`
}

// Modes holds one ramp mode.
type Modes struct {
	Scheduled  *struct{}   `yaml:"scheduled"`
	Relaxed    *struct{}   `yaml:"relaxed"`
	OnlyIfUsed *OnlyIfUsed `yaml:"onlyIfUsed"`
	GoBackN    *GoBackN    `yaml:"goBackN"`
}

// OnlyIfUsed ramps up only after well-used epochs.
type OnlyIfUsed struct {
	ThresholdPercentage *uint32 `yaml:"thresholdPercentage"`
}

// GoBackN also ramps down after poorly used or idle epochs.
type GoBackN struct {
	ThresholdPercentage *uint32   `yaml:"thresholdPercentage"`
	CoolDownPeriod      *Duration `yaml:"coolDownPeriod"`
	RampDownPercentage  *uint32   `yaml:"rampDownPercentage"`
}

// Source is where a vertex reads from: one kind, and optionally a transformer.
type Source struct {
	Generator   *Generator       `yaml:"generator"`
	HTTP        *HTTPSource      `yaml:"http"`
	UDSource    *UDContainer     `yaml:"udsource"`
	Kafka       *KafkaSource     `yaml:"kafka"`
	Nats        *NatsSource      `yaml:"nats"`
	JetStream   *JetStreamSource `yaml:"jetstream"`
	SQS         *SQSSource       `yaml:"sqs"`
	Transformer *Transformer     `yaml:"transformer"`
	Serving     Unsupported      `yaml:"serving"`
	Pulsar      Unsupported      `yaml:"pulsar"`
}

// Generator is the generator source.
type Generator struct {
	// RPU is the messages made per Duration (default 5).
	RPU      *int64    `yaml:"rpu"`
	Duration *Duration `yaml:"duration"`
	// MsgSize is the approximate payload size in bytes (default 8).
	MsgSize  *int32 `yaml:"msgSize"`
	KeyCount *int32 `yaml:"keyCount"`
	// Keys (sluice's addition, instead of keyCount) are the messages' keys in
	// turn, the same on every replica; a key listed n times gets n turns.
	Keys   []string  `yaml:"keys"`
	Value  *uint64   `yaml:"value"`
	Jitter *Duration `yaml:"jitter"`
	// ValueBlob is a base64 payload sent as it is.
	ValueBlob *string `yaml:"valueBlob"`
}

// Defaults of the generator source.
const (
	DefaultGeneratorRPU      = 5
	DefaultGeneratorDuration = time.Second
	DefaultGeneratorMsgSize  = 8
)

// HTTPSource is the http source. It serves HTTPS on ports.https (default
// DefaultHTTPSPort, Numaflow's), with the certificate of tls or else a
// self-signed one made at start, and plain HTTP besides on ports.http when
// it is set, as Numaflow's does.
type HTTPSource struct {
	Service K8s        `yaml:"service"`
	Auth    *HTTPAuth  `yaml:"auth"`
	Ports   *HTTPPorts `yaml:"ports"`
	// TLS (sluice's addition) is the certificate and key HTTPS is served
	// with; without it, a self-signed certificate made at start.
	TLS *HTTPSourceTLS `yaml:"tls"`
	// MaxQueueBytes (sluice's addition) is how many bytes of request bodies
	// the source holds at most, from a request's admission until its message
	// is acked (default the source package's DefaultHTTPMaxQueueBytes, 128 MiB; at least
	// MinHTTPMaxQueueBytes). A request that does not fit gets 429 with
	// Retry-After before its body is read; a body larger than it gets 413.
	MaxQueueBytes *uint64 `yaml:"maxQueueBytes"`
	// ReadHeaderTimeout (sluice's addition) is how long a request's headers
	// may take to arrive (default the source package's
	// DefaultHTTPReadHeaderTimeout, 10s); a connection whose headers are late
	// is closed.
	ReadHeaderTimeout *Duration `yaml:"readHeaderTimeout"`
	// ReadBodyTimeout and MinBodyBytesPerSecond (sluice's additions) are the
	// pace a body keeps: it must arrive within readBodyTimeout plus one
	// second for every minBodyBytesPerSecond bytes that have arrived
	// (defaults 10s and 500). A body that falls behind gets 408 Request
	// Timeout.
	ReadBodyTimeout       *Duration `yaml:"readBodyTimeout"`
	MinBodyBytesPerSecond *uint64   `yaml:"minBodyBytesPerSecond"`
	// IdleTimeout (sluice's addition) is how long a connection kept alive
	// may wait for its next request before it is closed (default 60s).
	IdleTimeout *Duration `yaml:"idleTimeout"`
	// MaxConnections (sluice's addition) is how many connections the source
	// holds open at most (default 4096): a new one closes the one that has
	// waited longest for a request, or gets 503 when every one is busy.
	MaxConnections *uint32 `yaml:"maxConnections"`
}

// MinHTTPMaxQueueBytes is the smallest maxQueueBytes accepted: a smaller
// value is more likely a size meant in another unit than bytes.
const MinHTTPMaxQueueBytes = 1024

// HTTPAuth requires a bearer token.
type HTTPAuth struct {
	Token *SecretKeySelector `yaml:"token"`
}

// HTTPPorts are the ports the http source listens on: HTTPS always, on
// HTTPS (default DefaultHTTPSPort), and plain HTTP besides on HTTP, only
// when it is set.
type HTTPPorts struct {
	HTTPS *int32 `yaml:"https"`
	HTTP  *int32 `yaml:"http"`
}

// DefaultHTTPSPort is the port the http source serves HTTPS on without
// ports.https, Numaflow's.
const DefaultHTTPSPort = 8443

// HTTPSourceTLS is the certificate the http source serves HTTPS with: a PEM
// certificate (chain) and its PEM private key, each a secret or a file.
type HTTPSourceTLS struct {
	CertSecret *SecretKeySelector `yaml:"certSecret"`
	KeySecret  *SecretKeySelector `yaml:"keySecret"`
}

// UDContainer is a user-defined source, sink or UDF container.
type UDContainer struct {
	Container *Container `yaml:"container"`
}

// Container is a user-defined container: sluice can start its command locally.
type Container struct {
	Image           string    `yaml:"image"`
	Command         []string  `yaml:"command"`
	Args            []string  `yaml:"args"`
	Env             []EnvVar  `yaml:"env"`
	EnvFrom         K8s       `yaml:"envFrom"`
	VolumeMounts    K8s       `yaml:"volumeMounts"`
	Resources       Resources `yaml:"resources"`
	SecurityContext K8s       `yaml:"securityContext"`
	// ImagePullPolicy is Always, IfNotPresent or Never; "" is Kubernetes'
	// default (Always for the tag latest or none, else IfNotPresent).
	ImagePullPolicy string `yaml:"imagePullPolicy"`
	ReadinessProbe  K8s    `yaml:"readinessProbe"`
	LivenessProbe   K8s    `yaml:"livenessProbe"`
	Ports           K8s    `yaml:"ports"`
}

// Resources are a container's resource limits and requests, Kubernetes
// quantities by resource name (cpu, memory). A container engine applies the
// limits of cpu and memory; the rest is Kubernetes'.
type Resources struct {
	Limits   map[string]string `yaml:"limits"`
	Requests map[string]string `yaml:"requests"`
	Claims   K8s               `yaml:"claims"`
}

// EnvVar is an environment variable; valueFrom is Kubernetes-only.
type EnvVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom K8s    `yaml:"valueFrom"`
}

// Transformer is a source transformer: a container or a built-in.
type Transformer struct {
	Container *Container `yaml:"container"`
	Builtin   *Builtin   `yaml:"builtin"`
	// RetryStrategy is how an input the transformer fails (a result tagged
	// U+005C__FAIL__) is tried again: onFailure retry or drop.
	RetryStrategy *RetryStrategy `yaml:"retryStrategy"`
}

// Builtin is a built-in function with its arguments.
type Builtin struct {
	Name   string            `yaml:"name"`
	Args   []string          `yaml:"args"`
	KWArgs map[string]string `yaml:"kwargs"`
}

// UDF is a vertex's function: a container or a built-in map; with GroupBy,
// a reduce.
type UDF struct {
	Container *Container `yaml:"container"`
	Builtin   *Builtin   `yaml:"builtin"`
	GroupBy   *GroupBy   `yaml:"groupBy"`
	// RetryStrategy is how an input a map fails (a result tagged
	// U+005C__FAIL__) is tried again: onFailure retry or drop. A reduce
	// (GroupBy) takes none.
	RetryStrategy *RetryStrategy `yaml:"retryStrategy"`
}

// GroupBy makes a vertex's function a reduce over event-time windows.
type GroupBy struct {
	// Window is how messages are grouped: one of its kinds.
	Window Window `yaml:"window"`
	// Keyed reduces each key set on its own (default false: all messages
	// of a window together).
	Keyed *bool `yaml:"keyed"`
	// AllowedLateness keeps a window open this long past its end for
	// messages that come late (default 0).
	AllowedLateness *Duration `yaml:"allowedLateness"`
	// Storage is where the vertex keeps what it has read of open windows.
	Storage *PBQStorage `yaml:"storage"`
}

// GetKeyed returns keyed, or false when it is not set.
func (g *GroupBy) GetKeyed() bool { return g != nil && g.Keyed != nil && *g.Keyed }

// GetAllowedLateness returns allowedLateness, or 0 when it is not set.
func (g *GroupBy) GetAllowedLateness() time.Duration {
	if g == nil || g.AllowedLateness == nil {
		return 0
	}
	return g.AllowedLateness.Duration
}

// Window is a reduce's windowing: fixed, sliding, session or accumulator.
type Window struct {
	Fixed       *FixedWindow       `yaml:"fixed"`
	Sliding     *SlidingWindow     `yaml:"sliding"`
	Session     *SessionWindow     `yaml:"session"`
	Accumulator *AccumulatorWindow `yaml:"accumulator"`
}

// AccumulatorWindow is one accumulator per key set, closed once the key set
// has been idle for the timeout.
type AccumulatorWindow struct {
	Timeout *Duration `yaml:"timeout"`
}

// SessionWindow is sessions per key set that end after timeout without a
// message.
type SessionWindow struct {
	Timeout *Duration `yaml:"timeout"`
}

// FixedWindow is windows of one length that do not overlap.
type FixedWindow struct {
	Length *Duration `yaml:"length"`
	// Streaming is set for a reduce streamer function.
	Streaming *bool `yaml:"streaming"`
}

// SlidingWindow is windows of one length that start every slide.
type SlidingWindow struct {
	Length *Duration `yaml:"length"`
	Slide  *Duration `yaml:"slide"`
	// Streaming is set for a reduce streamer function.
	Streaming *bool `yaml:"streaming"`
}

// PBQStorage is where a reduce vertex keeps what it has read of its open
// windows: a volume (persistentVolumeClaim or emptyDir, whose settings
// concern Kubernetes), or no_store, memory alone.
type PBQStorage struct {
	PersistentVolumeClaim *PersistenceStrategy `yaml:"persistentVolumeClaim"`
	EmptyDir              *EmptyDir            `yaml:"emptyDir"`
	NoStore               *struct{}            `yaml:"no_store"`
}

// PersistenceStrategy is the persistent volume claim of a reduce's storage;
// its settings concern Kubernetes.
type PersistenceStrategy struct {
	StorageClassName K8s `yaml:"storageClassName"`
	AccessMode       K8s `yaml:"accessMode"`
	VolumeSize       K8s `yaml:"volumeSize"`
}

// EmptyDir is the emptyDir volume of a reduce's storage; its settings concern
// Kubernetes.
type EmptyDir struct {
	Medium    K8s `yaml:"medium"`
	SizeLimit K8s `yaml:"sizeLimit"`
}

// Sink is where a vertex writes to: one kind, and optionally a fallback and
// an on-success sink (where the messages the sink answers ON_SUCCESS go).
type Sink struct {
	AbstractSink  `yaml:",inline"`
	Fallback      *AbstractSink  `yaml:"fallback"`
	OnSuccess     *AbstractSink  `yaml:"onSuccess"`
	RetryStrategy *RetryStrategy `yaml:"retryStrategy"`
}

// AbstractSink is one sink kind.
type AbstractSink struct {
	Log       *struct{}    `yaml:"log"`
	Blackhole *struct{}    `yaml:"blackhole"`
	UDSink    *UDContainer `yaml:"udsink"`
	Kafka     *KafkaSink   `yaml:"kafka"`
	// HTTP is sluice's addition.
	HTTP   *HTTPSink   `yaml:"http"`
	SQS    *SQSSink    `yaml:"sqs"`
	Serve  Unsupported `yaml:"serve"`
	Pulsar Unsupported `yaml:"pulsar"`
}

// RetryStrategy is how failed sink writes, and the inputs a map or a
// transformer fails, are retried.
type RetryStrategy struct {
	Backoff *Backoff `yaml:"backoff"`
	// OnFailure is what happens to a message once the backoff is spent: retry,
	// fallback or drop (a forward.OnFailure's name). Unset, sluice retries,
	// or, with a fallback sink, falls back after some attempts. A map or a
	// transformer takes retry or drop.
	OnFailure *string `yaml:"onFailure"`
}

// Backoff is an exponential backoff.
type Backoff struct {
	Interval *Duration `yaml:"interval"`
	Steps    *uint32   `yaml:"steps"`
	Factor   *float64  `yaml:"factor"`
	Cap      *Duration `yaml:"cap"`
	Jitter   *float64  `yaml:"jitter"`
}

// DefaultRetryInterval is a backoff's first wait when it sets no interval,
// Numaflow's and the forwarder's.
const DefaultRetryInterval = time.Millisecond

// Pipeline is a graph of vertices connected by buffers.
type Pipeline struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   Metadata     `yaml:"metadata"`
	Spec       PipelineSpec `yaml:"spec"`
	Status     K8s          `yaml:"status"`
}

// PipelineSpec is a pipeline's spec.
type PipelineSpec struct {
	InterStepBufferServiceName string          `yaml:"interStepBufferServiceName"`
	Vertices                   []Vertex        `yaml:"vertices"`
	Edges                      []Edge          `yaml:"edges"`
	Lifecycle                  K8s             `yaml:"lifecycle"`
	Limits                     *PipelineLimits `yaml:"limits"`
	Watermark                  *Watermark      `yaml:"watermark"`
	Templates                  K8s             `yaml:"templates"`
	SideInputs                 []SideInput     `yaml:"sideInputs"`
	InterStepBuffer            K8s             `yaml:"interStepBuffer"`
	Ordered                    *Ordered        `yaml:"ordered"`
	// ISB is sluice's addition: how the vertices reach their buffers.
	ISB *ISB `yaml:"isb"`
}

// Watermark is a pipeline's spec.watermark: how its sources compute event
// time progress.
type Watermark struct {
	// Disabled turns watermarks off: every vertex's watermark is -1.
	Disabled bool `yaml:"disabled"`
	// MaxDelay is how far a source's watermark stays behind the event times
	// it reads (default 0s).
	MaxDelay *Duration `yaml:"maxDelay"`
	// IdleSource moves the watermark of a source that reads nothing.
	IdleSource *IdleSource `yaml:"idleSource"`
}

// IdleSource is spec.watermark.idleSource.
type IdleSource struct {
	// Threshold is how long a partition reads nothing before it is idle.
	Threshold *Duration `yaml:"threshold"`
	// StepInterval is the time between two steps (default 0s).
	StepInterval *Duration `yaml:"stepInterval"`
	// IncrementBy is how far one step moves an idle partition.
	IncrementBy *Duration `yaml:"incrementBy"`
	// InitSourceDelay is accepted and not used: a source that has read
	// nothing has no watermark.
	InitSourceDelay *Duration `yaml:"initSourceDelay"`
}

// ISB is where a pipeline's buffers live.
type ISB struct {
	JetStream *JetStreamISB `yaml:"jetstream"`
}

// JetStreamISB is a NATS JetStream server and how buffers are kept on it.
type JetStreamISB struct {
	URL      string             `yaml:"url"`
	User     *SecretKeySelector `yaml:"user"`
	Password *SecretKeySelector `yaml:"password"`
	Token    *SecretKeySelector `yaml:"token"`
	TLS      *TLS               `yaml:"tls"`
	// Storage is file (default) or memory (a jetstream.Storage's name).
	Storage *string `yaml:"storage"`
	// AckWait is how long a message read and not acked waits before it is
	// delivered again (default: the jsconsumer package's DefaultAckWait).
	AckWait *Duration `yaml:"ackWait"`
	// Duplicates is the window in which a message written twice is stored once
	// (default: the jetstream package's DefaultDuplicateWindow).
	Duplicates *Duration `yaml:"duplicates"`
	// FrameSize is the most messages that travel in one JetStream message
	// (default 1: each alone).
	FrameSize *uint32 `yaml:"frameSize"`
}

// GetAckWait returns ackWait, or 0 when it is not set: the ISB then applies
// its default, the jsconsumer package's DefaultAckWait.
func (j *JetStreamISB) GetAckWait() time.Duration {
	if j == nil || j.AckWait == nil {
		return 0
	}
	return j.AckWait.Duration
}

// MaxJetStreamFrameSize is the largest frameSize.
const MaxJetStreamFrameSize = 1000

// GetFrameSize returns frameSize or its default, 1.
func (j *JetStreamISB) GetFrameSize() int {
	if j == nil || j.FrameSize == nil || *j.FrameSize == 0 {
		return 1
	}
	return int(*j.FrameSize)
}

// GetDuplicates returns duplicates, or 0 when it is not set: the ISB then
// applies its default, the jetstream package's DefaultDuplicateWindow.
func (j *JetStreamISB) GetDuplicates() time.Duration {
	if j == nil || j.Duplicates == nil {
		return 0
	}
	return j.Duplicates.Duration
}

// Vertex is one vertex of a pipeline: a source, a UDF or a sink.
type Vertex struct {
	PodTemplate                 `yaml:",inline"`
	Name                        string          `yaml:"name"`
	Source                      *Source         `yaml:"source"`
	Sink                        *Sink           `yaml:"sink"`
	UDF                         *UDF            `yaml:"udf"`
	Limits                      *PipelineLimits `yaml:"limits"`
	Partitions                  *int32          `yaml:"partitions"`
	Scale                       *Scale          `yaml:"scale"`
	ContainerTemplate           K8s             `yaml:"containerTemplate"`
	InitContainerTemplate       K8s             `yaml:"initContainerTemplate"`
	Volumes                     K8s             `yaml:"volumes"`
	InitContainers              K8s             `yaml:"initContainers"`
	Sidecars                    K8s             `yaml:"sidecars"`
	SideInputs                  []string        `yaml:"sideInputs"`
	SideInputsContainerTemplate K8s             `yaml:"sideInputsContainerTemplate"`
	UpdateStrategy              K8s             `yaml:"updateStrategy"`
	Ordered                     *Ordered        `yaml:"ordered"`
}

// Edge connects two vertices, optionally only for messages with some tags.
type Edge struct {
	From       string          `yaml:"from"`
	To         string          `yaml:"to"`
	Conditions *EdgeConditions `yaml:"conditions"`
	// OnFull is retryUntilSuccess (default) or discardLatest (a
	// route.OnFull's name).
	OnFull *string `yaml:"onFull"`
}

// EdgeConditions forward a message when its tags match.
type EdgeConditions struct {
	Tags *TagConditions `yaml:"tags"`
}

// TagConditions match a message's tags: or (default), and, not (a
// route.Operator's name).
type TagConditions struct {
	Operator *string  `yaml:"operator"`
	Values   []string `yaml:"values"`
}

// Bypass is a MonoVertex's bypass: conditions on a message's tags, checked
// after the source (and its transformer) and after the UDF, that send the
// message straight to the sink, the fallback sink or the on-success sink,
// tried in that order.
type Bypass struct {
	Sink      *EdgeConditions `yaml:"sink"`
	Fallback  *EdgeConditions `yaml:"fallback"`
	OnSuccess *EdgeConditions `yaml:"onSuccess"`
}
