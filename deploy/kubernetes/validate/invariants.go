package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/render"
)

// drainAfterJobs is what worker serve does after -shutdown-timeout before
// it exits: close the pool (bounded by a minute) and reap what is left
// (30 s) (internal/worker/serve.go, Serve and startPool).
const drainAfterJobs = 90 * time.Second

// secretEnv are settings that hold a password: they must come from a
// Secret (valueFrom), never as a plain value in a manifest.
var secretEnv = map[string]bool{
	"RENDERBOX_REDIS_PASSWORD": true,
	"RENDERBOX_REDIS_URL":      true,
	"RENDERBOX_DB":             true,
	"AWS_ACCESS_KEY_ID":        true,
	"AWS_SECRET_ACCESS_KEY":    true,
}

// Check tests what the chart promises (docs/kubernetes.md): the API's
// Deployment runs unprivileged with a PodDisruptionBudget and probes on
// its health endpoints; the worker's DaemonSet runs only on labelled nodes
// with a grace period that outlasts the longest job the ceilings allow;
// every scrape annotation names a port a container listens on; every
// variable set is one its program reads; no plain environment value holds
// a secret.
func Check(objs []Object) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	var api *appsv1.Deployment
	var worker *appsv1.DaemonSet
	var pdbs []*policyv1.PodDisruptionBudget
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			if v.Labels["app.kubernetes.io/component"] == "api" {
				api = v
			}
			checkPod(o.Source, &v.Spec.Template, fail)
		case *appsv1.DaemonSet:
			if v.Labels["app.kubernetes.io/component"] == "worker" {
				worker = v
			}
			checkPod(o.Source, &v.Spec.Template, fail)
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, v)
		case *corev1.Pod, *appsv1.StatefulSet, *appsv1.ReplicaSet:
			fail("%s: a %T: the chart makes Deployments and DaemonSets only", o.Source, v)
		}
	}
	settings, err := Settings(settingsDoc)
	if err != nil {
		return err
	}
	if api != nil {
		checkSettings("Deployment "+api.Name, "api serve", api.Spec.Template.Spec.Containers, settings["api"], fail)
	}
	if worker != nil {
		checkSettings("DaemonSet "+worker.Name, "worker serve", worker.Spec.Template.Spec.Containers, settings["worker"], fail)
	}
	if api == nil {
		fail("no Deployment labelled app.kubernetes.io/component=api")
	} else {
		checkAPI(api, pdbs, fail)
	}
	if worker == nil {
		fail("no DaemonSet labelled app.kubernetes.io/component=worker")
	} else {
		checkWorker(worker, fail)
	}
	if api != nil && worker != nil {
		a := env(api.Spec.Template.Spec.Containers, "RENDERBOX_CEILINGS")
		w := env(worker.Spec.Template.Spec.Containers, "RENDERBOX_CEILINGS")
		if a != w {
			fail("the API's RENDERBOX_CEILINGS %q differs from the workers' %q: set them together (docs/settings.md)", a, w)
		}
	}
	// Only the workers deliver to buckets: the API holds the store's keys
	// only when its documents are in the store.
	if api != nil && env(api.Spec.Template.Spec.Containers, "RENDERBOX_BLOBS") == "" {
		for _, c := range api.Spec.Template.Spec.Containers {
			if fromSecret(c, "AWS_ACCESS_KEY_ID") || fromSecret(c, "AWS_SECRET_ACCESS_KEY") {
				fail("Deployment %s: container %s holds the object store's keys without RENDERBOX_BLOBS: only the workers use them (deliver.s3)", api.Name, c.Name)
			}
		}
	}
	return errors.Join(errs...)
}

func checkAPI(d *appsv1.Deployment, pdbs []*policyv1.PodDisruptionBudget, fail func(string, ...any)) {
	name := "Deployment " + d.Name
	pod := d.Spec.Template.Spec
	covered := false
	for _, p := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			covered = true
			if p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable == nil {
				fail("PodDisruptionBudget %s sets neither minAvailable nor maxUnavailable", p.Name)
			}
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			if m := p.Spec.MinAvailable; m != nil && m.Type == intstr.Int && m.IntVal >= replicas {
				fail("PodDisruptionBudget %s keeps %d of %d replicas: no node drain could ever evict one", p.Name, m.IntVal, replicas)
			}
		}
	}
	if !covered {
		fail("%s: no PodDisruptionBudget selects its pods", name)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
			(pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
		if !nonRoot {
			fail("%s: container %s may run as root (runAsNonRoot)", name, c.Name)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			fail("%s: container %s has a writable root file system", name, c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil && *sc.Privileged {
			fail("%s: container %s may gain privileges", name, c.Name)
		}
		if sc == nil || sc.Capabilities == nil || !hasCap(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			fail("%s: container %s keeps capabilities (want drop ALL, add none)", name, c.Name)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			fail("%s: container %s's liveness probe is not GET /healthz", name, c.Name)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			fail("%s: container %s's readiness probe is not GET /readyz", name, c.Name)
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p != nil && p.HTTPGet != nil && portOf(c, p.HTTPGet.Port.String()) != listenPort(env([]corev1.Container{c}, "RENDERBOX_ADDR")) {
				fail("%s: container %s probes port %s, not RENDERBOX_ADDR's %q", name, c.Name, p.HTTPGet.Port.String(), env([]corev1.Container{c}, "RENDERBOX_ADDR"))
			}
		}
		if env([]corev1.Container{c}, "RENDERBOX_DB") == "" && !fromSecret(c, "RENDERBOX_DB") {
			fail("%s: container %s has no RENDERBOX_DB: the replicas need the shared PostgreSQL ledger", name, c.Name)
		}
	}
}

func checkWorker(ds *appsv1.DaemonSet, fail func(string, ...any)) {
	name := "DaemonSet " + ds.Name
	pod := ds.Spec.Template.Spec
	if len(pod.NodeSelector) == 0 {
		fail("%s: no nodeSelector: workers would run on every node, runsc or not", name)
	}
	for k, v := range pod.NodeSelector {
		if k == "" || v == "" {
			fail("%s: nodeSelector %q=%q names no label value", name, k, v)
		}
	}
	longest, which, err := longestAttempt(env(pod.Containers, "RENDERBOX_CEILINGS"))
	if err != nil {
		fail("%s: %v", name, err)
		return
	}
	raw := env(pod.Containers, "RENDERBOX_SHUTDOWN_TIMEOUT")
	shutdown := 30 * time.Second // worker serve's default
	if raw != "" {
		if shutdown, err = time.ParseDuration(raw); err != nil {
			fail("%s: RENDERBOX_SHUTDOWN_TIMEOUT %q: %v", name, raw, err)
			return
		}
	}
	if shutdown < longest {
		fail("%s: -shutdown-timeout %s is shorter than the longest attempt, %s (%s): a drain would requeue jobs it could have finished", name, shutdown, longest, which)
	}
	grace := 30 * time.Second // Kubernetes' default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if grace < shutdown+drainAfterJobs {
		fail("%s: terminationGracePeriodSeconds %v is shorter than -shutdown-timeout %s plus %s to close the pool and reap: the kubelet would kill the worker mid-drain", name, grace.Seconds(), shutdown, drainAfterJobs)
	}
	for _, c := range pod.Containers {
		if c.StartupProbe == nil && c.LivenessProbe == nil {
			fail("%s: container %s has no probe", name, c.Name)
		}
	}
}

// longestAttempt is the longest one attempt of a job may run under the
// ceilings: the largest renderer timeout in the catalogue (raised or
// lowered by ceilings) plus the slack the API gives every attempt.
func longestAttempt(ceilings string) (time.Duration, string, error) {
	cs, err := render.ParseCeilings(ceilings)
	if err != nil {
		return 0, "", fmt.Errorf("RENDERBOX_CEILINGS: %w", err)
	}
	var longest time.Duration
	var which string
	for _, n := range render.Names() {
		r, err := render.Lookup(n)
		if err != nil {
			return 0, "", err
		}
		t := r.Limits.Timeout
		for _, c := range cs {
			if c.Renderer == n && c.Timeout > 0 {
				t = c.Timeout
			}
		}
		if t > longest {
			longest, which = t, n
		}
	}
	return longest + jobspec.AttemptSlack, fmt.Sprintf("%s's %s and %s of slack", which, longest, jobspec.AttemptSlack), nil
}

// checkPod tests what holds for every pod: no secret in a plain value,
// scrape annotations that name a port a container listens on.
func checkPod(src string, t *corev1.PodTemplateSpec, fail func(string, ...any)) {
	all := append(append([]corev1.Container{}, t.Spec.InitContainers...), t.Spec.Containers...)
	for _, c := range all {
		for _, e := range c.Env {
			if e.Value == "" {
				continue
			}
			if secretEnv[e.Name] {
				fail("%s: container %s sets %s as a plain value: give it from a Secret", src, c.Name, e.Name)
			}
			if u, err := url.Parse(e.Value); err == nil && u.User != nil {
				if _, ok := u.User.Password(); ok {
					fail("%s: container %s's %s is a URL with a password in it: give it from a Secret", src, c.Name, e.Name)
				}
			}
		}
	}
	if t.Annotations["prometheus.io/scrape"] == "true" {
		port := t.Annotations["prometheus.io/port"]
		found := false
		for _, c := range t.Spec.Containers {
			for _, p := range c.Ports {
				if strconv.Itoa(int(p.ContainerPort)) == port {
					found = true
					if got := listenPort(env([]corev1.Container{c}, "RENDERBOX_METRICS_ADDR")); got != port {
						fail("%s: prometheus.io/port %s is not RENDERBOX_METRICS_ADDR's port (%q)", src, port, got)
					}
				}
			}
		}
		if !found {
			fail("%s: prometheus.io/port %q is no container's port", src, port)
		}
		if t.Annotations["prometheus.io/path"] != "/metrics" {
			fail("%s: prometheus.io/path is %q; both programs serve /metrics", src, t.Annotations["prometheus.io/path"])
		}
	}
}

// env is the plain value of name in the first container that sets it.
func env(cs []corev1.Container, name string) string {
	for _, c := range cs {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

func fromSecret(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return true
		}
	}
	return false
}

func hasCap(cs []corev1.Capability, want corev1.Capability) bool {
	for _, c := range cs {
		if c == want {
			return true
		}
	}
	return false
}

// portOf resolves a probe's port (a number or a port's name).
func portOf(c corev1.Container, port string) string {
	for _, p := range c.Ports {
		if p.Name == port {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return port
}

// listenPort is the port of a listen address such as ":8080".
func listenPort(addr string) string {
	_, port, err := net.SplitHostPort(strings.TrimSpace(addr))
	if err != nil {
		return ""
	}
	return port
}
