// Package deploy holds the files that run turnd in production, and the tests
// that hold them to the code. It has no Go API of its own:
//
//	Dockerfile    multi-stage build of a static, non-root image
//	compose/      Postgres, a migration job, two replicas behind HAProxy,
//	              Prometheus (scrape config and alert rules) and Grafana
//	              (datasource and dashboard)
//	kubernetes/   Deployment, Service, PodDisruptionBudget, migration Job,
//	              ServiceMonitor, PrometheusRule, ConfigMap, Secret example
//
// No container engine runs these files in the tests. Instead they parse every
// YAML and JSON file, check that the paths, ports, probes, labels and
// environment variables the files name agree with each other and with
// cmd/turnd, run promtool (check config, check rules, test rules) when it is
// installed, and check that every metric name in the dashboard's and the
// alert rules' PromQL is one turnd exports.
//
// The tests may import any turnd package (they load the tool configs with
// package tool); non-test code here imports nothing.
package deploy
