// Package monitoring holds no code: it is the home of sluice's Prometheus
// alerting rules (alerts.yaml, with their unit tests in alerts_test.yaml) and
// of its Grafana dashboard (dashboard.json).
//
// Its tests run `promtool check rules` and `promtool test rules` on the rules
// and on the dashboard's queries, and check that every metric the rules and
// the dashboard name is one the metrics table of docs/observability.md lists,
// and that the dashboard shows every metric it lists.
package monitoring
