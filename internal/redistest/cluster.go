package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterCreateTimeout = 30 * time.Second // redis-cli --cluster create
	clusterReadyTimeout  = 20 * time.Second // until every node reports cluster_state:ok
	clusterMasters       = 3
)

// Cluster is a Redis Cluster of three masters and no replicas, started by
// StartCluster; each master owns a third of the 16384 slots.
type Cluster struct {
	Nodes []*Server

	opts Options
}

// StartCluster starts three redis-server processes with cluster-enabled yes
// (each with its nodes-<port>.conf in its own temporary directory), joins
// them with redis-cli --cluster create --cluster-replicas 0, and returns once
// every node reports cluster_state:ok (at most 20 s). o.Password and o.Args
// apply to every node; TLS, Users and ReplicaOf are not supported. The nodes
// are killed when the test finishes.
//
// A redis-server or redis-cli without cluster support (before Redis 5, or
// redis-cli missing) skips the test with one line saying so.
func StartCluster(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.TLS || len(o.Users) > 0 || o.ReplicaOf != "" {
		t.Fatal("redistest: StartCluster supports Options.Password and Options.Args only")
	}
	bin := redisServerPath(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redistest: redis-cli not found: Redis Cluster tests need redis-cli --cluster (Redis 5 or later)")
	}
	if v, err := serverMajor(bin); err != nil || v < 5 {
		t.Skipf("redistest: redis-server has no cluster support redis-cli --cluster can use (major version %d, %v); Redis 5 or later needed", v, err)
	}
	c := &Cluster{opts: o}
	for range clusterMasters {
		s := newServer(t, o, false)
		s.cluster = true
		s.startFresh(t, bin)
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = os.Environ()
	if o.Password != "" {
		// Not on the command line, where ps would show it.
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+o.Password)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s\n%s", err, out, c.diag())
	}
	for _, s := range c.Nodes {
		waitFor(t, clusterReadyTimeout, "cluster_state:ok on "+s.Addr, func() error {
			v, err := s.probeDo(probeTimeout, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			info, _ := v.(string)
			if st := infoField(info, "cluster_state"); st != "ok" {
				return fmt.Errorf("cluster_state:%s", st)
			}
			if n := infoField(info, "cluster_known_nodes"); n != strconv.Itoa(clusterMasters) {
				return fmt.Errorf("cluster_known_nodes:%s", n)
			}
			return nil
		}, c.diag)
	}
	return c
}

var versionRE = regexp.MustCompile(`v=(\d+)\.`)

// serverMajor returns the major version redis-server --version reports.
func serverMajor(bin string) (int, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return 0, err
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0, errors.New("no version in " + strings.TrimSpace(string(out)))
	}
	return strconv.Atoi(string(m[1]))
}

// Addrs returns the nodes' host:port, the seed addresses of a cluster client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// ClusterOptions returns go-redis options for the cluster: the nodes as seeds
// and the default user's password.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), Password: c.opts.Password}
}

// Client returns a cluster client; it is closed when the test finishes.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(c.ClusterOptions())
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func (c *Cluster) diag() string {
	var b strings.Builder
	for _, s := range c.Nodes {
		v, err := s.probeDo(probeTimeout, "CLUSTER", "INFO")
		fmt.Fprintf(&b, "%s: %v %v\n", s.Addr, v, err)
	}
	return b.String()
}
