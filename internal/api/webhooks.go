package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/tracing"
	"github.com/renderbox/renderbox/internal/webhook"
)

// Webhooks configures job webhooks. The zero value refuses callback_url.
type Webhooks struct {
	// Master is the secret every key's webhook secret derives from; nil
	// disables webhooks.
	Master []byte
	// Policy decides which addresses may receive webhooks.
	Policy webhook.Policy
	// Sender posts them; nil means webhook.NewSender(Policy, nil, 0).
	Sender *webhook.Sender
	// Schedule is the wait before each retry; nil means
	// webhook.DefaultSchedule.
	Schedule webhook.Schedule
	// Poll is how often due retries are looked for. Default 1s; an ending
	// job is announced at once.
	Poll time.Duration
	// Parallel bounds deliveries in flight. Default 8.
	Parallel int
}

func (w Webhooks) enabled() bool { return len(w.Master) > 0 }

func (w Webhooks) withDefaults() Webhooks {
	if w.Sender == nil {
		w.Sender = webhook.NewSender(w.Policy, nil, 0)
	}
	if w.Schedule == nil {
		w.Schedule = webhook.DefaultSchedule
	}
	if w.Poll == 0 {
		w.Poll = time.Second
	}
	if w.Parallel == 0 {
		w.Parallel = 8
	}
	return w
}

// webhookView is a job's webhook as the API shows it.
type webhookView struct {
	URL           string     `json:"url"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LastStatus    int        `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
}

// withWebhook adds the job's webhook record to v: "waiting" until the job
// ends, then the delivery's state.
func (s *Server) withWebhook(ctx context.Context, v jobView, j ledger.Job) jobView {
	if j.CallbackURL == "" {
		return v
	}
	wv := &webhookView{URL: j.CallbackURL, State: "waiting"}
	if w, err := s.Ledger.GetWebhook(ctx, j.Owner, j.ID); err == nil {
		wv.State, wv.Attempts, wv.LastStatus, wv.LastError = string(w.State), w.Attempts, w.LastStatus, w.LastError
		wv.NextAttemptAt, wv.FinishedAt = utcOrNil(w.NextAt), utcOrNil(w.FinishedAt)
	}
	v.Webhook = wv
	return v
}

// webhookSecret answers GET /v1/webhook-secret: the calling key's secret
// for verifying webhook signatures.
func (s *Server) webhookSecret(w http.ResponseWriter, r *http.Request) {
	if !s.Webhooks.enabled() {
		problem(w, http.StatusNotFound, "webhooks_disabled", "this server does not send webhooks")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"secret": webhook.DeriveSecret(s.Webhooks.Master, keyOf(r).ID), "scheme": "Standard Webhooks v1 (HMAC-SHA256)",
	})
}

// wakeWebhooks tells the deliverer that a job ended.
func (s *Server) wakeWebhooks() {
	select {
	case s.webhookWake <- struct{}{}:
	default:
	}
}

// RunWebhooks delivers the webhooks of ended jobs until ctx ends. Any number
// of API processes may run it against one ledger: each delivery is claimed.
func (s *Server) RunWebhooks(ctx context.Context) error {
	if !s.Webhooks.enabled() {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTicker(s.Webhooks.Poll)
	defer tick.Stop()
	// A claimed delivery is hidden from other deliverers for longer than
	// any attempt can take.
	lease := s.Webhooks.Sender.Timeout() + time.Minute
	slots := make(chan struct{}, s.Webhooks.Parallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		free := cap(slots) - len(slots)
		if free > 0 {
			claims, err := s.Ledger.ClaimWebhooks(ctx, time.Now(), lease, free)
			if err != nil && ctx.Err() == nil {
				s.Logger.Error("claiming webhooks", "err", err)
			}
			for _, c := range claims {
				slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-slots; wg.Done() }()
					s.deliver(ctx, c)
				}()
			}
			if len(claims) == free {
				continue // there may be more due
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.webhookWake:
		case <-tick.C:
		}
	}
}

// webhookEvent is the body of a webhook, in the Standard Webhooks shape.
type webhookEvent struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      jobView   `json:"data"`
}

// deliver makes one attempt of a claimed webhook and records it.
func (s *Server) deliver(ctx context.Context, c ledger.WebhookClaim) {
	// A child of the job's intake span, whichever replica took it in: the
	// delivery joins the job's trace. Only the host is named: a callback
	// URL's path or query may carry the client's token.
	ctx, span := s.startSpan(tracing.WithParent(ctx, c.Job.TraceParent), tracing.SpanWebhook, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.JobID.String(c.JobID), tracing.Attempt.Int(c.Attempts), tracing.ServerAddr.String(tracing.Host(c.URL))))
	defer span.End()
	body, err := json.Marshal(webhookEvent{Type: "job." + string(c.Job.State), Timestamp: c.Job.FinishedAt.UTC(), Data: s.view(c.Job)})
	if err != nil {
		s.Logger.Error("encoding a webhook", "job_id", c.JobID, "err", err)
		return // the lease expires and the next claim tries again
	}
	res := s.Webhooks.Sender.Send(ctx, webhook.Message{
		URL: c.URL, ID: "msg_" + strings.TrimPrefix(c.JobID, "job_"),
		Secret: webhook.DeriveSecret(s.Webhooks.Master, c.Job.Owner), Body: body,
	}, time.Now())
	if ctx.Err() != nil && !res.Delivered() {
		return // shutting down: the claim's lease expires and it is retried
	}
	a := ledger.WebhookAttempt{Attempt: c.Attempts, Status: res.Status, Delivered: res.Delivered()}
	outcome := "delivered"
	if !res.Delivered() {
		a.Error = res.Err.Error()
		outcome = "failed"
		if wait, ok := s.Webhooks.Schedule.Next(c.Attempts); ok && !res.Permanent() {
			a.RetryAt, outcome = time.Now().Add(wait), "retry"
		}
	}
	s.metrics.webhooks.WithLabelValues(outcome).Inc()
	span.SetAttributes(tracing.Outcome.String(outcome), tracing.HTTPStatus.Int(res.Status))
	if outcome != "delivered" {
		span.SetStatus(codes.Error, "webhook "+outcome)
	}
	log := s.Logger.With("job_id", c.JobID, "attempt", c.Attempts, "outcome", outcome, "status", res.Status)
	if res.Err != nil {
		log = log.With("err", res.Err.Error())
	}
	log.Info("webhook attempt")
	// Recorded even if ctx ended meanwhile: the attempt happened.
	if _, err := s.Ledger.RecordWebhook(context.WithoutCancel(ctx), c.JobID, a); err != nil {
		s.Logger.Error("recording a webhook attempt", "job_id", c.JobID, "err", err)
	}
}

func newWebhookMetric(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderbox_webhook_attempts_total", Help: "Webhook delivery attempts, by outcome (delivered, retry, failed).",
	}, []string{"outcome"})
	reg.MustRegister(c)
	return c
}
