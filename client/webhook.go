package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/renderbox/renderbox/internal/webhook"
)

// WebhookEvent is what a webhook delivers when a job ends.
type WebhookEvent struct {
	Type      string    `json:"type"` // job.succeeded, job.failed, job.canceled
	Timestamp time.Time `json:"timestamp"`
	Data      Job       `json:"data"`
}

// VerifyWebhook checks a delivery (Standard Webhooks: the webhook-id,
// webhook-timestamp and webhook-signature headers over the raw body)
// with the key's secret (WebhookSecret) and decodes it. A delivery whose
// timestamp is over 5 minutes from now is refused: a replay. The same
// delivery may arrive more than once (a retry after a lost answer); its
// webhook-id stays the same.
func VerifyWebhook(secret string, h http.Header, body []byte) (*WebhookEvent, error) {
	if err := webhook.Verify(secret, h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"), body, time.Now()); err != nil {
		return nil, fmt.Errorf("renderbox: webhook not verified: %w", err)
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("renderbox: webhook body: %w", err)
	}
	return &ev, nil
}

// WebhookSecret returns the secret that signs the key's webhooks.
func (c *Client) WebhookSecret(ctx context.Context) (string, error) {
	req, err := c.request(ctx, "GET", "/v1/webhook-secret", nil)
	if err != nil {
		return "", err
	}
	var s struct {
		Secret string `json:"secret"`
	}
	return s.Secret, c.doJSON(req, &s)
}
