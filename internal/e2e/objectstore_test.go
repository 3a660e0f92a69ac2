//go:build !unit

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
)

// objectStoreStack is a stack whose API and worker keep documents in a
// bucket of s3 under prefix (-blobs), their keys in the environment.
func objectStoreStack(t *testing.T, s3 *testenv.S3Server, prefix string, o stackOpts) *stack {
	t.Helper()
	blobArgs := []string{"-blobs", s3.URL(prefix)}
	o.access = func(rs *testenv.RedisServer, _ string) map[string]redisAccess {
		a := redisAccess{args: append([]string{"-redis", rs.Addr}, blobArgs...), env: s3.Env()}
		return map[string]redisAccess{"api": a, "worker": a}
	}
	return newStack(t, o)
}

// storeJob is one job of the comparison: a renderer and its input.
type storeJob struct {
	renderer string
	input    []byte
}

// runJobs submits each job, waits for them all and returns each job's
// outputs by name, as downloaded.
func runJobs(t *testing.T, s *stack, key string, jobs []storeJob) []map[string][]byte {
	t.Helper()
	var ids []string
	for _, j := range jobs {
		ids = append(ids, submitOK(t, s.client, key, j.renderer, j.input))
	}
	var outs []map[string][]byte
	for i, id := range ids {
		j := waitEnded(t, s.client, key, id, 120*time.Second)
		checkSucceededOnce(t, s.client, key, j)
		got := map[string][]byte{}
		for _, o := range j.Outputs {
			r := s.client.do("GET", o.URL, key, "", nil, nil)
			if r.Status != 200 {
				t.Fatalf("job %d (%s) output %s: %d", i, j.Renderer, o.Name, r.Status)
			}
			got[o.Name] = r.Body
		}
		outs = append(outs, got)
	}
	return outs
}

// redisDocumentBytes reads every value in Redis and returns the keys
// whose values hold any of needles, and the memory Redis reports for all
// its keys.
func redisDocumentBytes(t *testing.T, opts *redis.Options, needles [][]byte) (holding []string, keys int, memory int64) {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		keys++
		n, _ := rdb.MemoryUsage(ctx, k).Result()
		memory += n
		var vals []string
		switch typ, _ := rdb.Type(ctx, k).Result(); typ {
		case "string":
			v, _ := rdb.Get(ctx, k).Result()
			vals = append(vals, v)
		case "hash":
			m, _ := rdb.HGetAll(ctx, k).Result()
			for _, v := range m {
				vals = append(vals, v)
			}
		case "list":
			vals, _ = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			vals, _ = rdb.SMembers(ctx, k).Result()
		case "zset":
			vals, _ = rdb.ZRange(ctx, k, 0, -1).Result()
		case "stream":
			msgs, _ := rdb.XRange(ctx, k, "-", "+").Result()
			for _, m := range msgs {
				for _, v := range m.Values {
					vals = append(vals, fmt.Sprint(v))
				}
			}
		}
	search:
		for _, v := range vals {
			for _, n := range needles {
				if strings.Contains(v, string(n)) {
					holding = append(holding, k)
					break search
				}
			}
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return holding, keys, memory
}

// needle is 48 bytes from the middle of b: present in any copy of b
// however it is framed.
func needle(b []byte) []byte {
	if len(b) <= 48 {
		return b
	}
	return b[len(b)/2-24 : len(b)/2+24]
}

// The same jobs through a Redis-backed stack and an object-store one:
// every output byte-identical, the object store's Redis holding none of
// the documents' bytes (every value read and searched, its memory
// measured beside the Redis-backed one's), outputs downloaded through
// the presigned redirect.
func TestObjectStoreOutputsMatchRedis(t *testing.T) {
	jobs := []storeJob{
		{"svg-png", samples.SVG(300, 200, 3, 4, 20)},
		{"dot-svg", samples.DOT("store", "blobs")},
		{"pdf-png", samples.PDF("object storage", 3)},
		{"svg-png", samples.SVG(120, 90, 7, 1, 10)},
		{"dot-svg", samples.DOT("redis", "refs")},
	}
	var needles [][]byte
	for _, j := range jobs {
		needles = append(needles, needle(j.input))
	}

	rs := newStack(t, stackOpts{})
	fromRedis := runJobs(t, rs, rs.key("ref"), jobs)
	_, redisKeys, redisMem := redisDocumentBytes(t, rs.redisSrv.Options(), nil)

	s3 := testenv.StartS3(t)
	ss := objectStoreStack(t, s3, "e2e", stackOpts{})
	fromStore := runJobs(t, ss, ss.key("store"), jobs)

	total := 0
	for i := range jobs {
		if len(fromStore[i]) != len(fromRedis[i]) {
			t.Errorf("job %d (%s): %d outputs from the object store, %d from Redis", i, jobs[i].renderer, len(fromStore[i]), len(fromRedis[i]))
		}
		for name, b := range fromRedis[i] {
			if !bytes.Equal(fromStore[i][name], b) {
				t.Errorf("job %d (%s) output %s: %d bytes from the object store differ from Redis's %d", i, jobs[i].renderer, name, len(fromStore[i][name]), len(b))
			}
			needles = append(needles, needle(b))
			total += len(b)
		}
	}
	for _, j := range jobs {
		total += len(j.input)
	}
	holding, keys, mem := redisDocumentBytes(t, ss.redisSrv.Options(), needles)
	t.Logf("%d jobs, %d bytes of inputs and outputs: Redis-backed run %d keys, %d bytes (MEMORY USAGE); object-store run %d keys, %d bytes",
		len(jobs), total, redisKeys, redisMem, keys, mem)
	if len(holding) > 0 {
		t.Errorf("with the object store, Redis keys hold document bytes: %v", holding)
	}
	// The redirect itself: a 302 to the store, the URL valid minutes.
	key := ss.key("redirect")
	j := waitEnded(t, ss.client, key, submitOK(t, ss.client, key, "dot-svg", samples.DOT("a", "b")), 60*time.Second)
	if len(j.Outputs) == 0 {
		t.Fatalf("job %s: %s with no outputs", j.ID, j.State)
	}
	req, _ := http.NewRequest("GET", ss.base+j.Outputs[0].URL, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || !strings.HasPrefix(loc, "http://"+s3.Endpoint+"/") || !strings.Contains(loc, "X-Amz-Expires=300") {
		t.Errorf("GET %s: %d to %q, want a 302 to the store's presigned URL valid 300s", j.Outputs[0].URL, resp.StatusCode, loc)
	}
}

// The store stopped mid-run: a job running when it went away cannot
// store its outputs and waits (the worker retries while the task's lease
// holds), new submissions are refused with a 503 naming the document
// store and /readyz is 503; the store back, the running job succeeds once with its outputs
// and the queue drains. No job is lost or succeeds without its outputs.
func TestObjectStoreOutage(t *testing.T) {
	s3 := testenv.StartS3(t)
	s := objectStoreStack(t, s3, "outage", stackOpts{workerArgs: []string{"-concurrency", "1"}})
	c := s.client
	key := s.key("oscar")
	r, slow := submitJSON(t, c, key, "pdf-png", samples.PDF("outage", 10), map[string]any{"dpi": 300}, "", nil)
	if r.Status != 202 {
		t.Fatalf("submitting the slow job: %d %s", r.Status, tail(r.Body))
	}
	queued := []string{submitOK(t, c, key, "svg-png", samples.SVG(40, 40, 1, 1, 10)), submitOK(t, c, key, "dot-svg", samples.DOT("q", "1"))}
	waitFor(t, "the slow job to run in a sandbox", 60*time.Second, func() bool {
		return getJob(t, c, key, slow.ID, "").State == "running" && runscList(t, s.workerSB) == 1
	})
	down := time.Now()
	s3.Stop()
	r, _ = submitJSON(t, c, key, "svg-png", samples.SVG(30, 30, 2, 2, 10), nil, "", nil)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "document store") {
		t.Errorf("a submission with the store down: %d %s (Retry-After %q), want 503 naming the document store", r.Status, tail(r.Body), r.Header.Get("Retry-After"))
	}
	if rd, err := readyz(s.base); err != nil || rd.status != 503 || rd.Checks["blobs"] != "unavailable" {
		t.Errorf("/readyz with the store down: %d %v (%v), want 503 with blobs unavailable", rd.status, rd.Checks, err)
	}
	waitFor(t, "the worker to fail to store the slow job's outputs", leaseSafeOutage, func() bool {
		return strings.Contains(s.worker.output(), `"doing":"storing the outputs"`)
	})
	if st := getJob(t, c, key, slow.ID, "").State; st != "running" {
		t.Errorf("the slow job is %s while its outputs cannot be stored, want running", st)
	}
	outage := time.Since(down)
	if outage > leaseSafeOutage {
		t.Fatalf("the outage lasted %v, past the %v that keeps asynq's leases valid", outage, leaseSafeOutage)
	}
	s3.Start()
	t.Logf("the store was down %v", time.Since(down).Round(time.Millisecond))
	waitFor(t, "/readyz to answer 200 again by itself", 15*time.Second, func() bool {
		rd, err := readyz(s.base)
		return err == nil && rd.status == 200 && rd.Checks["blobs"] == "ok"
	})
	ids := append([]string{slow.ID}, queued...)
	ids = append(ids, submitOK(t, c, key, "svg-png", samples.SVG(30, 30, 5, 5, 10)))
	for _, id := range ids {
		checkSucceededOnce(t, c, key, waitEnded(t, c, key, id, 120*time.Second))
	}
	checkRanOnce(t, s, ids)
}
