package vertexconfig

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluiceflow/sluice/config"
)

// TestRedisConnCluster: cluster mode gives the nodes as seeds with the
// credentials of redisAuth, and a refusal blames redisAuth, redisTLS or
// cluster.addrs.
func TestRedisConnCluster(t *testing.T) {
	pass := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pass, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const path = "spec.limits.rateLimit.store.redisStore"
	rs := &config.RedisStore{
		Mode:      config.RedisModeCluster,
		Cluster:   &config.RedisCluster{Addrs: []string{"a:6379", "b:6379"}},
		RedisAuth: &config.RedisAuth{Password: &config.SecretKeySelector{File: pass}},
	}
	conn, fields, err := redisConn(rs, path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(conn.ClusterAddrs, rs.Cluster.Addrs) || conn.URL != "" || conn.MasterName != "" || conn.Password != "s3cret" || conn.TLS != nil {
		t.Fatalf("conn %+v; want the cluster's nodes and the password, no URL, master or TLS", conn)
	}
	if want := (redisFields{store: path, creds: path + ".redisAuth", tls: path + ".redisTLS", host: path + ".cluster.addrs"}); fields != want {
		t.Fatalf("fields %+v; want %+v", fields, want)
	}
}
