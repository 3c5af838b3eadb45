package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// tokenSource fetches OAUTHBEARER tokens with the client-credentials grant and
// keeps each until shortly before it expires. It is safe for concurrent use:
// one fetch runs at a time, and the callers waiting for it share its token.
type tokenSource struct {
	cfg  OAuth
	http *http.Client
	now  func() time.Time

	mu      sync.Mutex
	token   string
	refresh time.Time // when token is to be fetched again
}

func newTokenSource(role Role, cfg *OAuth) (*tokenSource, error) {
	if cfg == nil {
		return nil, configErr(role, "sasl oauth", "", "is required for OAUTHBEARER")
	}
	switch {
	case cfg.ClientID == "":
		return nil, configErr(role, "sasl oauth clientID", "", "is required")
	case cfg.ClientSecret == "":
		return nil, configErr(role, "sasl oauth clientSecret", "", "is required")
	}
	if err := checkEndpoint(role, cfg.TokenEndpoint); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &tokenSource{cfg: *cfg, http: hc, now: time.Now}, nil
}

// auth is the franz-go OAUTHBEARER callback.
func (t *tokenSource) auth(ctx context.Context) (oauth.Auth, error) {
	tok, err := t.Token(ctx)
	return oauth.Auth{Token: tok}, err
}

// Token returns the cached token, or fetches a new one when it is due.
func (t *tokenSource) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && t.now().Before(t.refresh) {
		return t.token, nil
	}
	tok, life, err := t.fetch(ctx)
	if err != nil {
		return "", err
	}
	t.token, t.refresh = tok, t.now().Add(life*4/5)
	return tok, nil
}

// tokenAnswer is a token endpoint's answer: a token, or an OAuth error.
type tokenAnswer struct {
	AccessToken string          `json:"access_token"`
	ExpiresIn   json.RawMessage `json:"expires_in"` // a number, or a string some servers send
	Error       string          `json:"error"`
	Description string          `json:"error_description"`
}

// fetch asks the endpoint for a token and returns it with its lifetime (0
// when the endpoint gave none: the token is then fetched again at the next
// authentication).
func (t *tokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.cfg.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("kafka oauth: token request to %s: %w", t.cfg.TokenEndpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(t.cfg.ClientID), url.QueryEscape(t.cfg.ClientSecret))
	resp, err := t.http.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("kafka oauth: token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("kafka oauth: reading the answer of %s: %w", t.cfg.TokenEndpoint, err)
	}
	var a tokenAnswer
	jsonErr := json.Unmarshal(body, &a)
	if resp.StatusCode != http.StatusOK {
		msg := resp.Status
		if a.Error != "" {
			msg += ": " + a.Error
			if a.Description != "" {
				msg += " (" + a.Description + ")"
			}
		}
		return "", 0, fmt.Errorf("kafka oauth: token endpoint %s answered %s", t.cfg.TokenEndpoint, msg)
	}
	if jsonErr != nil || a.AccessToken == "" {
		return "", 0, fmt.Errorf("kafka oauth: token endpoint %s answered no access_token", t.cfg.TokenEndpoint)
	}
	return a.AccessToken, lifetime(a.ExpiresIn), nil
}

// lifetime reads expires_in, a number of seconds or a string of one.
func lifetime(raw json.RawMessage) time.Duration {
	s := strings.Trim(string(raw), `"`)
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}
