package podman

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/numaflowgo"
	"github.com/sluiceflow/sluice/internal/podmantest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
)

const (
	serveTimeout = 30 * time.Second // from podman run to the server-info file
	goneTimeout  = 20 * time.Second // from podman stop to the container gone
)

// numaflowGoRoles are the images Numaflow's example pipelines 6, 7, 12, 13
// and 14 (examples/*.yaml in Numaflow's tree) run, with the roles they play
// there: NUMAFLOW_UD_CONTAINER_TYPE as Numaflow sets it, and the kind of
// server each then is.
var numaflowGoRoles = []struct {
	image string
	roles []role
}{
	{"quay.io/numaio/numaflow-go/map-even-odd:stable", []role{{"udf", serverinfo.KindMap}}},
	{"quay.io/numaio/numaflow-go/reduce-sum:stable", []role{{"udf", serverinfo.KindReduce}}},
	{"quay.io/numaio/numaflow-go/session-counter:stable", []role{{"udf", serverinfo.KindSessionReduce}}},
	{"quay.io/numaio/numaflow-go/reduce-stream-sum:stable", []role{{"udf", serverinfo.KindReduceStream}}},
	{"quay.io/numaio/numaflow-go/map-cat:stable", []role{{"udf", serverinfo.KindMap}}},
	{"quay.io/numaio/numaflow-go/fb-sink-log:stable", []role{
		{"udsink", serverinfo.KindSink},
		{serverinfo.ContainerTypeFallbackSink, serverinfo.KindFallbackSink},
	}},
}

type role struct {
	containerType string
	kind          serverinfo.Kind
}

// TestPodmanNumaflowGoImages builds the images of numaflow-go's examples
// that Numaflow's example pipelines name, from the source tree
// NUMAFLOW_GO_DIR names, and runs each in each of its roles as a vertex
// replica runs a user-defined container: podman run --pull=never (no
// registry is asked), --network host, a host directory, mode 0777, mounted
// at /var/run/numaflow. Within 30 s the server writes its server-info file,
// which sluice reads and accepts, and listens on its socket there, both as
// user 65532; podman stop ends it and the container is gone. A directory
// root made with mode 0755 is not writable by the image's user: the server
// exits non-zero saying so.
func TestPodmanNumaflowGoImages(t *testing.T) {
	src := os.Getenv(numaflowgo.EnvDir)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's example images are not built (set it to a numaflow-go source tree)", numaflowgo.EnvDir)
	}
	p := podmantest.New(t)
	var names []string
	for _, r := range numaflowGoRoles {
		names = append(names, r.image)
	}
	ids := p.NumaflowGoImages(t, src, names...)
	for _, r := range numaflowGoRoles {
		size := checkNumaflowGoImage(t, p, r.image, ids[r.image])
		for _, rl := range r.roles {
			t.Run(shortName(r.image)+","+rl.containerType, func(t *testing.T) {
				serveOnce(t, p, r.image, rl, size)
			})
		}
	}
	t.Run("directory not writable", func(t *testing.T) {
		notWritable(t, p, numaflowGoRoles[0].image)
	})
}

// shortName is an image's name without its registry path and tag.
func shortName(image string) string {
	image = image[strings.LastIndex(image, "/")+1:]
	return strings.SplitN(image, ":", 2)[0]
}

// checkNumaflowGoImage checks that the name stands for the image of ID id,
// that it runs /bin/server with no arguments as 65532, and returns its size.
func checkNumaflowGoImage(t *testing.T, p *podmantest.Podman, name, id string) int64 {
	t.Helper()
	var info []struct {
		ID     string `json:"Id"`
		Size   int64
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
		}
	}
	if err := json.Unmarshal([]byte(p.Run(t, "image", "inspect", name)), &info); err != nil || len(info) != 1 {
		t.Fatalf("podman image inspect %s: %v", name, err)
	}
	c := info[0].Config
	if info[0].ID != id {
		t.Errorf("%s is image %s; NumaflowGoImages built %s", name, info[0].ID, id)
	}
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/bin/server"}) || len(c.Cmd) != 0 {
		t.Errorf("%s runs %v %v as %q; want [/bin/server] with no arguments as 65532:65532", name, c.Entrypoint, c.Cmd, c.User)
	}
	return info[0].Size
}

// serveOnce runs the image in the role in a container of its own until its
// server serves, then stops it.
func serveOnce(t *testing.T, p *podmantest.Podman, image string, r role, size int64) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("nfgo-%s-%s-%s", p.Tag(), shortName(image), r.containerType)
	defer p.Output(context.Background(), "rm", "--force", "--time", "0", name)
	start := time.Now()
	p.Run(t, "run", "--detach", "--rm", "--name", name, "--network", "host", "--pull", "never",
		"--volume", dir+":/var/run/numaflow", "--env", serverinfo.EnvContainerType+"="+r.containerType, image)
	detached := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	info, err := serverinfo.Wait(ctx, filepath.Join(dir, r.kind.InfoFile()), 10*time.Millisecond)
	if err != nil {
		t.Fatalf("%s as %s: %v; in %s: %v; logs:\n%s", image, r.containerType, err, dir, listDir(dir), logsOf(p, name))
	}
	serving := time.Since(start)
	if err := serverinfo.Check(info); err != nil {
		t.Errorf("the server info of %s: %v", image, err)
	}
	if r.kind == serverinfo.KindMap && info.MapKind() != serverinfo.KindMap {
		t.Errorf("%s announces map mode %q; want a unary map", image, info.Metadata[serverinfo.MapModeKey])
	}
	sock := filepath.Join(dir, r.kind.Socket())
	var conn net.Conn
	for deadline := time.Now().Add(serveTimeout); ; {
		if conn, err = net.Dial("unix", sock); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("%s as %s wrote its server info but does not listen on %s: %v", image, r.containerType, sock, err)
	}
	conn.Close()
	listening := time.Since(start)
	for _, f := range []string{r.kind.InfoFile(), r.kind.Socket()} {
		if fi, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65532 {
			t.Errorf("%s is owned by user %d; want 65532, the image's user", f, st.Uid)
		}
	}
	if got := listDir(dir); !slices.Equal(got, sortedNames(r.kind.InfoFile(), r.kind.Socket())) {
		t.Errorf("the server wrote %v in /var/run/numaflow; want its server-info file and socket", got)
	}

	stopStart := time.Now()
	p.Run(t, "stop", "--time", "10", name)
	stopped := time.Since(stopStart)
	gone := false
	for deadline := time.Now().Add(goneTimeout); !gone && time.Now().Before(deadline); {
		out, err := p.Output(context.Background(), "container", "exists", name)
		if gone = err != nil && !strings.Contains(out, "Error"); !gone {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !gone {
		t.Errorf("container %s is still there %v after podman stop", name, goneTimeout)
	}
	t.Logf("%s (%.1f MB) as %s: podman run returned after %v, server info after %v, listening after %v; stopped in %v, gone after %v",
		image, float64(size)/1e6, r.containerType, detached.Round(time.Millisecond), serving.Round(time.Millisecond),
		listening.Round(time.Millisecond), stopped.Round(time.Millisecond), time.Since(stopStart).Round(time.Millisecond))
}

// notWritable runs the image with a directory of root's, mode 0755, at
// /var/run/numaflow: its user cannot write there, and the server exits.
func notWritable(t *testing.T, p *podmantest.Podman, image string) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("nfgo-%s-%s-readonly", p.Tag(), shortName(image))
	defer p.Output(context.Background(), "rm", "--force", "--time", "0", name)
	p.Run(t, "run", "--detach", "--name", name, "--network", "host", "--pull", "never",
		"--volume", dir+":/var/run/numaflow", "--env", serverinfo.EnvContainerType+"=udf", image)
	running := "true"
	for deadline := time.Now().Add(serveTimeout); running == "true" && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		running = p.Inspect(t, name, "{{.State.Running}}")
	}
	if running == "true" {
		t.Fatalf("%s still runs %v after it started with /var/run/numaflow not writable", image, serveTimeout)
	}
	code := p.Inspect(t, name, "{{.State.ExitCode}}")
	stdout, stderr := p.Logs(t, name)
	out := stdout + stderr
	if code == "0" || !strings.Contains(out, "permission denied") {
		t.Errorf("%s exited with code %s, logs:\n%s\nwant an exit code not 0 and a permission denied", image, code, out)
	}
	if got := listDir(dir); len(got) != 0 {
		t.Errorf("%s wrote %v in a directory it may not write", image, got)
	}
	t.Logf("with /var/run/numaflow root's and 0755, %s exits with code %s: %s", image, code, lineWith(out, "permission denied"))
}

// logsOf is what a container wrote, or why podman cannot tell (a container
// run with --rm is gone once it exits).
func logsOf(p *podmantest.Podman, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := p.Command(ctx, "logs", name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s(podman logs: %v)", out, err)
	}
	return string(out)
}

// lineWith is the first line of s that holds sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func listDir(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return []string{err.Error()}
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func sortedNames(names ...string) []string {
	slices.Sort(names)
	return names
}
