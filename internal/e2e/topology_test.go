//go:build !unit

package e2e

// The fleet as operators run it: two API replicas and two worker hosts,
// each in a network namespace of its own, on one Redis and one
// PostgreSQL, with one of each killed and restarted mid-run.
//
//	go test ./internal/e2e -run TestTopology -count=1 -timeout 45m                        # 300 jobs (CI)
//	go test ./internal/e2e -run TestTopology -count=1 -timeout 90m -topology.jobs 1000    # full size

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

var topologyJobs = flag.Int("topology.jobs", 300, "jobs TestTopology spreads over its two API replicas (the full-size run is 1000; give it -timeout 90m)")

// privateNet is a network made for one test: a bridge in the test's own
// namespace holding the services' address (Redis, PostgreSQL, the webhook
// receiver), and a network namespace per host on it, joined by a veth pair
// and routed to the bridge's subnet only. A host so made reaches the
// services and the other hosts, and nothing else: not the test host's
// loopback, not the internet.
type privateNet struct {
	t      *testing.T
	id     int
	bridge string
	host   string // the bridge's address: where the services listen
	cidr   string
	n      int // hosts joined so far
}

// privateNets counts the private networks this test process made.
var privateNets atomic.Int32

func newPrivateNet(t *testing.T) *privateNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the topology test makes network namespaces and must run as root")
	}
	for _, bin := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing; install it with: apt-get install -y iproute2 util-linux (or: make setup)", bin)
		}
	}
	// One subnet per test, so that the two topology tests (parallel) and
	// two runs on one host (two checkouts) do not meet; 10.213/16 is
	// otherwise unused here.
	id := (os.Getpid()+int(privateNets.Add(1))-1)%250 + 1
	n := &privateNet{t: t, id: id, bridge: fmt.Sprintf("rbxbr%d", id),
		host: fmt.Sprintf("10.213.%d.1", id), cidr: fmt.Sprintf("10.213.%d.0/24", id)}
	_ = exec.Command("ip", "link", "del", n.bridge).Run() // a killed earlier run's
	n.ip("link", "add", n.bridge, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", n.bridge).Run() })
	n.ip("addr", "add", n.host+"/24", "dev", n.bridge)
	n.ip("link", "set", n.bridge, "up")
	return n
}

func (n *privateNet) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// join makes a host: a network namespace with loopback and one address on
// the bridge. It returns the namespace's name and the host's address.
func (n *privateNet) join(name string) (ns, addr string) {
	n.t.Helper()
	n.n++
	ns = fmt.Sprintf("rbx%d-%s", n.id, name)
	addr = fmt.Sprintf("10.213.%d.%d", n.id, 10+n.n)
	outer, inner := fmt.Sprintf("rbxh%d-%d", n.id, n.n), fmt.Sprintf("rbxn%d-%d", n.id, n.n)
	_ = exec.Command("ip", "netns", "del", ns).Run()
	n.ip("netns", "add", ns)
	n.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() }) // takes the veth pair with it
	n.ip("link", "add", outer, "type", "veth", "peer", "name", inner)
	n.ip("link", "set", inner, "netns", ns)
	n.ip("link", "set", outer, "master", n.bridge)
	n.ip("link", "set", outer, "up")
	n.ip("-n", ns, "addr", "add", addr+"/24", "dev", inner)
	n.ip("-n", ns, "link", "set", inner, "up")
	n.ip("-n", ns, "link", "set", "lo", "up")
	return ns, addr
}

// fleetHost is one API replica or worker of the fleet, in its namespace.
type fleetHost struct {
	name, ns, addr string
	env            []string
	args           []string
	proc           *proc
	procs          []*proc // every run of it, the killed ones too
	client         *client // an API's
	sb             sandbox.Config
}

// start runs the host's binary in its namespace (nsenter enters the
// network namespace only: the worker keeps the host's /sys and cgroups).
func (h *fleetHost) start(t *testing.T, bin string) {
	t.Helper()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.ns, "--", filepath.Join(bins, bin)}, h.args...)...)
	h.proc = startCmd(t, h.name, h.env, cmd)
	h.procs = append(h.procs, h.proc)
}

func (h *fleetHost) kill(t *testing.T) {
	t.Helper()
	if err := h.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.proc.cmd.Wait()
}

// finished counts the host's "job finished" lines over all its runs.
func (h *fleetHost) finished() map[string]int {
	all := map[string]int{}
	for _, p := range h.procs {
		for id, n := range finishedCounts(p.output()) {
			all[id] += n
		}
	}
	return all
}

func TestTopology(t *testing.T) {
	t.Parallel() // a fleet, mostly waiting on its hosts (package doc)
	topology(t, *topologyJobs, false)
}

// The fleet with documents in an object store (SeaweedFS on the private
// network): the same checks, outputs downloaded through the presigned
// redirect, and Redis holding no document bytes at the end.
func TestTopologyObjectStore(t *testing.T) {
	t.Parallel()
	topology(t, *topologyStoreJobs, true)
}

var topologyStoreJobs = flag.Int("topology.store-jobs", 60, "jobs TestTopologyObjectStore spreads over its two API replicas")

func topology(t *testing.T, n int, objectStore bool) {
	// Four worker slots on two cores finish about a job a second here.
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < 2*time.Minute+time.Duration(n)*3*time.Second {
		t.Fatalf("%d jobs need up to %v and the test has %v; raise -timeout", n, 2*time.Minute+time.Duration(n)*3*time.Second, time.Until(deadline).Round(time.Second))
	}
	pn := newPrivateNet(t)
	const retention = 20 * time.Minute
	rs := testenv.StartRedis(t, testenv.RedisConfig{Host: pn.host, Password: "fleet-" + strconv.Itoa(pn.id)})
	pg := testenv.StartPostgresOn(t, pn.host, pn.cidr)
	db := pg.NewDatabase(t) // on 127.0.0.1, for the test's own `api keys create`
	hostDB := strings.Replace(db, "@127.0.0.1:", "@"+pn.host+":", 1)
	secret := filepath.Join(t.TempDir(), "webhook.key")
	rcv := newHookReceiverOn(t, pn.host)
	redisEnv := []string{"RENDERBOX_REDIS_PASSWORD=" + rs.Password}
	var blobArgs []string
	if objectStore {
		s3 := testenv.StartS3On(t, pn.host)
		blobArgs = []string{"-blobs", s3.URL("fleet")}
		redisEnv = append(redisEnv, s3.Env()...)
	}

	var apis, workers []*fleetHost
	for _, name := range []string{"api-a", "api-b"} {
		ns, addr := pn.join(name)
		h := &fleetHost{name: name, ns: ns, addr: addr, env: append([]string{"RENDERBOX_DB=" + hostDB}, redisEnv...),
			args: []string{"serve", "-addr", addr + ":8080", "-metrics-addr", addr + ":9090", "-redis", "redis://" + rs.Addr,
				"-webhook-secret-file", secret, "-webhook-allow", pn.cidr, "-webhook-retry", "300ms,600ms,900ms",
				"-event-retry-after", "1s", "-retention", retention.String()}}
		h.args = append(h.args, blobArgs...)
		apis = append(apis, h)
	}
	for _, name := range []string{"worker-1", "worker-2"} {
		ns, addr := pn.join(name)
		sb := testenv.Manager(t, sandbox.Config{}).Config()
		h := &fleetHost{name: name, ns: ns, addr: addr, env: redisEnv, sb: sb,
			args: []string{"serve", "-name", name, "-rootfs", testenv.RootfsTree(t), "-state-dir", sb.StateDir,
				"-cgroup-parent", sb.CgroupParent, "-runsc", sb.Runsc, "-redis", "redis://" + rs.Addr,
				"-metrics-addr", "", "-concurrency", "2", "-pool-size", "none", "-heartbeat-interval", "1s"}}
		h.args = append(h.args, blobArgs...)
		workers = append(workers, h)
	}
	startWorkerHost := func(h *fleetHost) {
		h.start(t, "worker")
		waitFor(t, h.name+" to pass its checks and serve", 90*time.Second, func() bool {
			return strings.Contains(h.proc.output(), "worker ready")
		})
	}
	startAPIHost := func(h *fleetHost) {
		h.start(t, "api")
		waitFor(t, h.name+" to be ready", 60*time.Second, func() bool {
			rd, err := readyz("http://" + h.addr + ":8080")
			return err == nil && rd.status == 200
		})
		h.client = newClient(t, "http://"+h.addr+":8080")
	}
	for _, w := range workers {
		startWorkerHost(w)
	}
	for _, a := range apis {
		startAPIHost(a)
	}

	// Each host reaches the services and nothing else: not the test
	// host's own addresses (where a canary listens on every one), not the
	// internet.
	canary := testenv.Canary(t, "0.0.0.0:0")
	_, cport, _ := net.SplitHostPort(canary.Addr())
	outside := []string{"1.1.1.1:80", net.JoinHostPort(hostAddress(t), cport)}
	for _, h := range append(append([]*fleetHost{}, apis...), workers...) {
		out, _ := exec.Command("nsenter", "--net=/run/netns/"+h.ns, "--", "ip", "-4", "route").CombinedOutput()
		if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, pn.cidr+" dev") || strings.Contains(got, "\n") {
			t.Errorf("%s's routes: %q, want the private network's only", h.name, got)
		}
		if err := dialFrom(h.ns, rs.Addr); err != nil {
			t.Errorf("%s cannot reach Redis at %s: %v", h.name, rs.Addr, err)
		}
		for _, a := range outside {
			if err := dialFrom(h.ns, a); err == nil {
				t.Errorf("%s reached %s", h.name, a)
			}
		}
	}
	if canary.Hits() != 0 {
		t.Errorf("the test host's canary was reached %d times from the fleet's namespaces", canary.Hits())
	}

	keys := make([]string, loadKeys)
	for i := range keys {
		cmd := exec.Command(filepath.Join(bins, "api"), "keys", "create", fmt.Sprint("fleet-", i))
		cmd.Env = append(os.Environ(), "RENDERBOX_DB="+db)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("api keys create: %v", err)
		}
		keys[i] = strings.TrimSpace(string(out))
	}
	jobs := make([]*loadJob, n)
	for i := range jobs {
		j := mixedJob(t, i)
		j.key = keys[i%loadKeys]
		j.idem = fmt.Sprintf("fleet-%d-%d", time.Now().UnixNano(), i)
		// Submitted to one replica, waited on the other.
		j.via, j.await = apis[i%2].client, apis[(i+1)%2].client
		// One callback in ten answers 500 before it takes the event.
		path := fmt.Sprintf("/hook/%d", i)
		if i%10 == 3 {
			j.callback = rcv.answer(path, http.StatusInternalServerError)
		} else {
			j.callback = rcv.answer(path)
		}
		jobs[i] = j
	}

	// A third of the way through, kill -9 one replica and one worker and
	// start them again on the same addresses and state.
	var chaos atomic.Value
	chaos.Store("")
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		deadline := time.Now().Add(time.Duration(n) * 3 * time.Second)
		for time.Now().Before(deadline) {
			done := len(workers[0].finished()) + len(workers[1].finished())
			if done >= n/3 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		apis[1].kill(t)
		workers[0].kill(t)
		chaos.Store(fmt.Sprintf("killed %s and %s after %d jobs had finished", apis[1].name, workers[0].name,
			len(workers[0].finished())+len(workers[1].finished())))
		time.Sleep(2 * time.Second)
		startWorkerHost(workers[0])
		startAPIHost(apis[1])
	}()

	t0 := time.Now()
	runClients(t, apis[0].client, jobs, 8)
	wall := time.Since(t0)
	<-chaosDone
	t.Logf("%d jobs in %v (%.2f jobs/s); %s", n, wall.Round(time.Second), float64(n)/wall.Seconds(), chaos.Load())
	if t.Failed() {
		t.FailNow()
	}

	// A job the killed worker was running runs again elsewhere (it ran
	// -concurrency 2); no other job runs twice.
	retried := checkOutcomes(t, jobs, 2)
	// The ledger holds each job once, as both replicas list it.
	for _, a := range apis {
		checkListings(t, a.client, keys, jobs)
	}
	checkFleetOutputs(t, apis, jobs)
	checkFleetWebhooks(t, apis, rcv, jobs)
	// Each job finished once on the workers, or twice where it was
	// retried (its first run ended without a result, killed).
	finished := map[string]int{}
	for _, w := range workers {
		for id, c := range w.finished() {
			finished[id] += c
		}
	}
	for _, j := range jobs {
		if c := finished[j.id]; c < 1 || c > j.final.Attempts {
			t.Errorf("job %s finished %d times on the workers after %d attempts", j.id, c, j.final.Attempts)
		}
	}
	eventsSettledIn(t, rs)
	tasksSettledIn(t, rs)
	checkRedisBounded(t, rs, retention)
	if objectStore {
		var needles [][]byte
		total := 0
		for _, j := range jobs {
			needles = append(needles, needle(j.input))
			total += len(j.input)
		}
		holding, keys, mem := redisDocumentBytes(t, rs.Options(), needles)
		t.Logf("object store: %d jobs, %d bytes of inputs; Redis holds %d keys, %d bytes (MEMORY USAGE)", n, total, keys, mem)
		if len(holding) > 0 {
			t.Errorf("with the object store, Redis keys hold inputs' bytes: %v", holding)
		}
	}
	for _, w := range workers {
		m, err := sandbox.NewManager(w.sb)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, w.name+"'s sandboxes to be torn down", 30*time.Second, func() bool { return runscList(t, w.sb) == 0 })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		left, err := m.Leftovers(ctx)
		cancel()
		if err != nil || len(left) > 0 {
			t.Errorf("left on %s after every job ended: %v (%v)", w.name, left, err)
		}
	}
	t.Logf("%d retried after the kill; webhooks: %d deliveries", retried, rcv.total())
}

// checkFleetOutputs downloads every output from both replicas and checks
// its digest against the job record.
func checkFleetOutputs(t *testing.T, apis []*fleetHost, jobs []*loadJob) {
	t.Helper()
	for _, j := range jobs {
		for _, o := range j.final.Outputs {
			for _, a := range apis {
				r, err := a.client.try(nil, "GET", o.URL, j.key, "", nil, nil)
				if err != nil || r.Status != 200 {
					t.Errorf("job %s's %s from %s: %v", j.id, o.Name, a.name, statusOrErr(r, err))
					continue
				}
				sum := sha256.Sum256(r.Body)
				if hex.EncodeToString(sum[:]) != o.SHA256 {
					t.Errorf("job %s's %s from %s does not match its digest", j.id, o.Name, a.name)
				}
			}
		}
	}
}

func statusOrErr(r *response, err error) any {
	if err != nil {
		return err
	}
	return r.Status
}

// checkFleetWebhooks checks that each job's webhook was delivered, and
// sent once per attempt its record counts: no replica sent an attempt
// another had claimed.
func checkFleetWebhooks(t *testing.T, apis []*fleetHost, rcv *hookReceiver, jobs []*loadJob) {
	t.Helper()
	// A delivery the killed replica had sent but not yet recorded is
	// claimed again once its lease ends and sent again: one more attempt,
	// received once more. At most as many as a replica has in flight
	// (its deliverer's 8 slots); every attempt is still received once.
	const inFlight = 8
	var again []string
	for _, j := range jobs {
		path := strings.TrimPrefix(j.callback, rcv.base)
		var w webhookJSON
		waitFor(t, "job "+j.id+"'s webhook to be delivered", 60*time.Second, func() bool {
			var rec struct {
				Webhook *webhookJSON `json:"webhook"`
			}
			apis[j.n%2].client.do("GET", "/v1/jobs/"+j.id, j.key, "", nil, nil).json(t, &rec)
			if rec.Webhook == nil {
				t.Fatalf("job %s has no webhook record", j.id)
			}
			w = *rec.Webhook
			return w.State == "delivered" || w.State == "failed"
		})
		want := 1
		if j.n%10 == 3 {
			want = 2 // a 500 first
		}
		got := len(rcv.deliveries(path))
		if w.State == "delivered" && w.Attempts == want+1 && got == want+1 {
			again = append(again, j.id)
			continue
		}
		if w.State != "delivered" || w.Attempts != want || got != want {
			t.Errorf("job %s's webhook: %s after %d attempts, %d received, want delivered after %d", j.id, w.State, w.Attempts, got, want)
		}
	}
	if len(again) > inFlight {
		t.Errorf("%d webhooks were sent once more than their answers asked for (%v), more than the killed replica had in flight (%d)", len(again), again, inFlight)
	}
	if len(again) > 0 {
		t.Logf("%d webhooks in flight at the kill were sent again: %v", len(again), again)
	}
}

// tasksSettledIn waits until asynq holds no task still to run: none
// pending, active, waiting to retry or scheduled. A worker killed between
// reporting a job's result and asynq hearing of it (while the sandbox is
// torn down) leaves the job's task active: asynq takes it back once its
// lease has expired, on its recoverer's next round (a minute apart), to
// retry it, and the worker that gets it sees the job ended and completes
// it (internal/worker, ProcessTask). The ledger has the result long
// before.
func tasksSettledIn(t *testing.T, rs *testenv.RedisServer) {
	t.Helper()
	waitFor(t, "asynq to take back and complete the tasks a killed worker left active (its lease, then its recoverer's minute)", 3*time.Minute, func() bool {
		qi, err := asynqInfo(rs)
		return err == nil && qi.Pending+qi.Active+qi.Retry+qi.Scheduled == 0
	})
}

// checkRedisBounded checks that Redis holds nothing that outlives the
// retention. A key either expires within it, or is one of asynq's and
// renderbox's own structures (bounded by the fleet, not by the jobs),
// or is a finished task's record, which lives as long as its entry in
// the completed set (scored by when it expires) or the archived one
// (scored by when it was archived; the API's janitor deletes it a
// retention later).
func checkRedisBounded(t *testing.T, rs *testenv.RedisServer, retention time.Duration) {
	t.Helper()
	rdb := redis.NewClient(rs.Options())
	defer rdb.Close()
	ctx := context.Background()
	const prefix = "asynq:{" + queue.QueueName + "}:"
	slack := time.Minute
	now := time.Now()
	finished := map[string]bool{}
	for set, ok := range map[string]func(score float64) bool{
		"completed": func(expires float64) bool { return time.Unix(int64(expires), 0).Before(now.Add(retention + slack)) },
		"archived":  func(archived float64) bool { return time.Unix(int64(archived), 0).After(now.Add(-retention - slack)) },
	} {
		members, err := rdb.ZRangeWithScores(ctx, prefix+set, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			id := m.Member.(string)
			finished[id] = true
			if !ok(m.Score) {
				t.Errorf("task %s is %s with score %v: kept past the retention", id, set, m.Score)
			}
		}
	}
	structural := map[string]bool{"asynq:queues": true, "asynq:servers": true, "asynq:workers": true,
		prefix + "completed": true, prefix + "archived": true, prefix + "processed": true, prefix + "failed": true,
		queue.EventStream: true, "renderbox:workers": true} // the last: heartbeats, a member per worker
	daily := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `(processed|failed):\d{4}-\d{2}-\d{2}$`)
	var lasting []string
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		id, task := strings.CutPrefix(k, prefix+"t:")
		switch {
		case ttl > 0 && ttl <= retention+slack, structural[k]:
		case task && finished[id]:
		case daily.MatchString(k) && ttl > 0: // asynq's daily counts, a number a day
		default:
			lasting = append(lasting, fmt.Sprintf("%s (TTL %v)", k, ttl))
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lasting) > 0 {
		t.Errorf("kept in Redis past the %v retention: %v", retention, lasting)
	}
}

// dialFrom connects to addr from the network namespace ns (bash's
// /dev/tcp, so that nothing but the connection runs there).
func dialFrom(ns, addr string) error {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("nsenter", "--net=/run/netns/"+ns, "--", "timeout", "3",
		"bash", "-c", `exec 3<>"/dev/tcp/$0/$1"`, host, port).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hostAddress is an IPv4 address of the test host outside loopback and
// the test's networks: what a namespace must not reach.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	_, ours, _ := net.ParseCIDR("10.213.0.0/16")
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ours.Contains(ipn.IP) {
			return ipn.IP.String()
		}
	}
	t.Fatalf("the test host has no IPv4 address beside loopback: %v", addrs)
	return ""
}
