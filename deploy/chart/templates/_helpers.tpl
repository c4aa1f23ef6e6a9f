{{/* Helm's standard labels, on every object and pod template (never in a selector: a
Deployment's selector cannot change, so a label added there would fail the upgrade). render.py
generate leaves managed-by and helm.sh/chart out of the plain manifests, which kubectl apply
installs. */}}
{{- define "cluster-dns.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels of the cluster-dns objects but the Deployment (deployment.yaml says why):
CoreDNS's k8s-app, so the kube-dns Service, the dashboards and kube-prometheus-stack's CoreDNS
ServiceMonitor find the pods, and the standard ones. */}}
{{- define "cluster-dns.labels" -}}
k8s-app: kube-dns
app.kubernetes.io/name: cluster-dns
{{ include "cluster-dns.helmLabels" . }}
{{- end }}

{{/* The pod labels, which the Deployment, the PDB and the spread constraints select. */}}
{{- define "cluster-dns.selectorLabels" -}}
k8s-app: kube-dns
app.kubernetes.io/name: cluster-dns
{{- end }}

{{/* The autoscaler's pod selector. */}}
{{- define "cluster-dns.autoscalerLabels" -}}
k8s-app: cluster-dns-autoscaler
{{- end }}

{{/* The autoscaler's objects and pods. */}}
{{- define "cluster-dns.autoscalerObjectLabels" -}}
{{ include "cluster-dns.autoscalerLabels" . }}
app.kubernetes.io/name: cluster-dns-autoscaler
{{ include "cluster-dns.helmLabels" . }}
{{- end }}

{{/* True when an autoscaler owns the Deployment's replicas. Refuses both at once: they would
scale the same Deployment against each other. */}}
{{- define "cluster-dns.replicasOwned" -}}
{{- if and .Values.autoscaler.enabled .Values.hpa.enabled -}}
{{- fail "autoscaler.enabled and hpa.enabled both scale Deployment/cluster-dns: enable one" -}}
{{- end -}}
{{- if or .Values.autoscaler.enabled .Values.hpa.enabled -}}true{{- end -}}
{{- end }}

{{/* The Corefile of the central pods: corefile.override; or kubeadm's default
(config/Corefile) with clusterDomain when corefile.kubeadm is true; or else kubeadm's with the
protection (fairness, pods verified, topology: deploy/README.md, "Which Corefile"); then
corefile.extraServerBlocks. */}}
{{/* With nodeLocal.mode=fabric, the central Corefile gives the agents the cluster zone
(AXFR, IXFR) and tells them of its changes (NOTIFY) once they have transferred it. */}}
{{- define "cluster-dns.corefile" -}}
{{- $fabric := and .Values.nodeLocal.enabled (eq .Values.nodeLocal.mode "fabric") -}}
{{- include "cluster-dns.corefileText" (dict "root" . "protected" (not .Values.corefile.kubeadm) "transfer" $fabric) -}}
{{- end }}

{{/* The node agents' Corefile in watch mode: the central one without the protection, whose
Pods and Nodes watches every node would then open. */}}
{{- define "cluster-dns.nodeCorefile" -}}
{{- include "cluster-dns.corefileText" (dict "root" . "protected" false "transfer" false) -}}
{{- end }}

{{- define "cluster-dns.corefileText" -}}
{{- $v := .root.Values -}}
{{- if $v.corefile.override -}}
{{ $v.corefile.override | trimSuffix "\n" }}
{{- else -}}
.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    {{- if .protected }}
    fairness
    {{- end }}
    {{- if .transfer }}
    transfer {{ $v.clusterDomain }} {
       to *
       notify transferred
    }
    {{- end }}
    kubernetes {{ $v.clusterDomain }} in-addr.arpa ip6.arpa {
       {{- if .protected }}
       pods verified
       topology
       {{- else }}
       pods insecure
       {{- end }}
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success {{ $v.clusterDomain }}
       disable denial {{ $v.clusterDomain }}
    }
    loop
    reload
    loadbalance
}
{{- end }}
{{- with $v.corefile.extraServerBlocks }}

{{ . | trimSuffix "\n" }}
{{- end }}
{{ end }}

{{/* The server's command line as a flow list: -conf, --log-format unless text, then `extra`
(extraArgs for the Deployment; the node agents pass none). Called with (dict "root" $ "extra"
LIST). */}}
{{- define "cluster-dns.args" -}}
{{- $args := list "-conf" "/etc/cluster-dns/Corefile" -}}
{{- if ne .root.Values.logFormat "coredns" -}}
{{- $args = concat $args (list "--log-format" .root.Values.logFormat) -}}
{{- end -}}
{{- $quoted := list -}}
{{- range concat $args .extra -}}
{{- $quoted = append $quoted (toJson .) -}}
{{- end -}}
[{{ join ", " $quoted }}]
{{- end }}

{{/* The probes of a server container: the paths and ports are fixed (the container ports
liveness-probe, :8080, and readiness-probe, :8181, as kubeadm names them), the timing is
livenessProbe and readinessProbe. */}}
{{- define "cluster-dns.probes" -}}
livenessProbe:
  httpGet: {path: /health, port: liveness-probe, scheme: HTTP}
  initialDelaySeconds: {{ .Values.livenessProbe.initialDelaySeconds }}
  periodSeconds: {{ .Values.livenessProbe.periodSeconds }}
  timeoutSeconds: {{ .Values.livenessProbe.timeoutSeconds }}
  successThreshold: 1
  failureThreshold: {{ .Values.livenessProbe.failureThreshold }}
readinessProbe:
  httpGet: {path: /ready, port: readiness-probe, scheme: HTTP}
  initialDelaySeconds: {{ .Values.readinessProbe.initialDelaySeconds }}
  periodSeconds: {{ .Values.readinessProbe.periodSeconds }}
  timeoutSeconds: {{ .Values.readinessProbe.timeoutSeconds }}
  successThreshold: 1
  failureThreshold: {{ .Values.readinessProbe.failureThreshold }}
{{- end }}
