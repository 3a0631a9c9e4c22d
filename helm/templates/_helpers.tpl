{{/* Names */}}
{{- define "natsd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "natsd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "natsd.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "natsd.statefulSetName" -}}
{{- default (include "natsd.fullname" .) .Values.statefulSet.name -}}
{{- end -}}
{{- define "natsd.serviceName" -}}
{{- default (include "natsd.fullname" .) .Values.service.name -}}
{{- end -}}
{{- define "natsd.headlessServiceName" -}}
{{- default (printf "%s-headless" (include "natsd.fullname" .)) .Values.headlessService.name -}}
{{- end -}}
{{- define "natsd.configMapName" -}}
{{- default (printf "%s-config" (include "natsd.fullname" .)) .Values.configMap.name -}}
{{- end -}}
{{- define "natsd.pdbName" -}}
{{- default (include "natsd.fullname" .) .Values.podDisruptionBudget.name -}}
{{- end -}}
{{- define "natsd.serviceAccountName" -}}
{{- default (include "natsd.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
{{- define "natsd.jsPvcName" -}}
{{- default (printf "%s-js" (include "natsd.fullname" .)) .Values.config.jetstream.fileStore.pvc.name -}}
{{- end -}}
{{/* The store's volume: the PVC when fileStore and its pvc are on, else an emptyDir (the
     container's root filesystem is read-only) */}}
{{- define "natsd.jsPvc" -}}
{{- $js := .Values.config.jetstream -}}
{{- if and $js.enabled $js.fileStore.enabled $js.fileStore.pvc.enabled }}true{{ end -}}
{{- end -}}
{{/* A size as the nats-io chart writes it: a string unquoted (10Gi), a number as an integer */}}
{{- define "natsd.size" -}}
{{- if kindIs "string" . }}{{ printf "<< %s >>" . }}{{ else }}{{ printf "<< %d >>" (int64 .) }}{{ end -}}
{{- end -}}
{{- define "natsd.clusterName" -}}
{{- default (include "natsd.statefulSetName" .) .Values.config.cluster.name -}}
{{- end -}}

{{/* Secrets: the chart's own one, or an existing one */}}
{{- define "natsd.routeAuth" -}}
{{- $r := .Values.config.cluster.routeURLs -}}
{{- if and .Values.config.cluster.enabled (or $r.existingSecret $r.user $r.password) }}true{{ end -}}
{{- end -}}
{{- define "natsd.routeSecretName" -}}
{{- default (printf "%s-routes" (include "natsd.fullname" .)) .Values.config.cluster.routeURLs.existingSecret -}}
{{- end -}}
{{- define "natsd.authSecretName" -}}
{{- default (printf "%s-auth" (include "natsd.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{/* Labels */}}
{{- define "natsd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "natsd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: nats
{{- end -}}

{{- define "natsd.labels" -}}
{{ include "natsd.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* An image: (dict "image" .Values.x.image "global" .Values.global "tag" default-tag) */}}
{{- define "natsd.image" -}}
{{- $registry := default .global.image.registry .image.registry -}}
{{- $ref := .image.repository -}}
{{- if $registry }}{{ $ref = printf "%s/%s" $registry $ref }}{{ end -}}
{{- $ref = printf "%s:%s" $ref (default .tag .image.tag | toString) -}}
{{- if .image.digest }}{{ $ref = printf "%s@%s" $ref .image.digest }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{- define "natsd.pullPolicy" -}}
{{- default .global.image.pullPolicy .image.pullPolicy -}}
{{- end -}}

{{/* What natsd does not build yet: rendering fails with a clear message */}}
{{- define "natsd.unsupported" -}}
{{- $c := .Values.config -}}
{{- if $c.gateway.enabled }}{{ fail "config.gateway.enabled: gateway is not in this chart yet (natsd supports it; configure it without the chart)" }}{{ end -}}
{{- if $c.nats.tls.enabled }}{{ fail "config.nats.tls.enabled: client TLS is not in this chart yet (natsd supports it; configure it without the chart)" }}{{ end -}}
{{- if $c.leafnodes.enabled }}{{ fail "config.leafnodes.enabled: leaf nodes are not in this chart yet" }}{{ end -}}
{{- if $c.websocket.enabled }}{{ fail "config.websocket.enabled: WebSocket is not supported by natsd yet" }}{{ end -}}
{{- if $c.mqtt.enabled }}{{ fail "config.mqtt.enabled: MQTT is not supported by natsd yet" }}{{ end -}}
{{- if $c.monitor.tls.enabled }}{{ fail "config.monitor.tls.enabled: HTTPS monitoring is not in this chart yet (natsd supports it; configure it without the chart)" }}{{ end -}}
{{- if .Values.reloader.enabled }}{{ fail "reloader.enabled: the config reloader is not in this chart yet (natsd reloads on SIGHUP; use podTemplate.configChecksumAnnotation to roll pods on config changes)" }}{{ end -}}
{{- if and .Values.config.cluster.tls.enabled (not .Values.config.cluster.tls.secretName) }}{{ fail "config.cluster.tls.secretName is required when config.cluster.tls.enabled" }}{{ end -}}
{{- if and .Values.tlsCA.enabled (not (or .Values.tlsCA.secretName .Values.tlsCA.configMapName)) }}{{ fail "tlsCA.secretName or tlsCA.configMapName is required when tlsCA.enabled" }}{{ end -}}
{{- $r := .Values.config.cluster.routeURLs -}}
{{- if and (not $r.existingSecret) (or $r.user $r.password) (not (and $r.user $r.password)) }}{{ fail "config.cluster.routeURLs: set both user and password (or existingSecret)" }}{{ end -}}
{{- $a := .Values.auth -}}
{{- if $a.enabled -}}
{{- if and (eq $a.type "include") (not $a.existingSecret) }}{{ fail "auth.type include needs auth.existingSecret (a Secret holding the config fragment under auth.includeKey)" }}{{ end -}}
{{- if and (eq $a.type "user") (not $a.existingSecret) (not (and $a.user $a.password)) }}{{ fail "auth.type user needs auth.user and auth.password (or auth.existingSecret)" }}{{ end -}}
{{- if and (eq $a.type "token") (not $a.existingSecret) (not $a.token) }}{{ fail "auth.type token needs auth.token (or auth.existingSecret)" }}{{ end -}}
{{- end -}}
{{- if and .Values.metrics.enabled (not .Values.config.monitor.enabled) }}{{ fail "metrics.enabled needs config.monitor.enabled" }}{{ end -}}
{{- end -}}

{{/* Route hosts and URLs */}}
{{- define "natsd.domainSuffix" -}}
{{- if .Values.config.cluster.routeURLs.useFQDN -}}
{{- printf ".%s.svc.%s" (include "natsd.namespace" .) .Values.config.cluster.routeURLs.k8sClusterDomain -}}
{{- end -}}
{{- end -}}

{{/* The route hosts, one per line: the headless name, or every pod */}}
{{- define "natsd.routeHosts" -}}
{{- $headless := include "natsd.headlessServiceName" . -}}
{{- $suffix := include "natsd.domainSuffix" . -}}
{{- if eq .Values.config.cluster.seed "pods" -}}
{{- $sts := include "natsd.statefulSetName" . -}}
{{- range $i, $_ := until (int .Values.config.cluster.replicas) }}
{{ printf "%s-%d.%s%s" $sts $i $headless $suffix }}
{{- end -}}
{{- else }}
{{ printf "%s%s" $headless $suffix }}
{{- end -}}
{{- end -}}

{{- define "natsd.routeScheme" -}}
{{- if .Values.config.cluster.tls.enabled }}tls{{ else }}nats-route{{ end -}}
{{- end -}}

{{/* The CA file for tls blocks, if any */}}
{{- define "natsd.clusterCAFile" -}}
{{- if .Values.tlsCA.enabled -}}
{{- printf "%s/%s" .Values.tlsCA.dir .Values.tlsCA.key -}}
{{- else if .Values.config.cluster.tls.ca -}}
{{- printf "%s/%s" .Values.config.cluster.tls.dir .Values.config.cluster.tls.ca -}}
{{- end -}}
{{- end -}}

{{/* nats.conf: a map rendered as JSON (natsd reads JSON as config); "<< X >>" strings are
     written unquoted (variable references), a "$include" key becomes an include directive */}}
{{- define "natsd.config" -}}
{{- $v := .Values -}}
{{- $c := dict "server_name" "<< $SERVER_NAME >>" "port" $v.config.nats.port "pid_file" "/var/run/nats/nats.pid" -}}
{{- if $v.config.monitor.enabled -}}
{{- $_ := set $c "http_port" $v.config.monitor.port -}}
{{- end -}}
{{- if $v.config.lameDuck.enabled -}}
{{- $_ := set $c "lame_duck_duration" (printf "%ds" (int $v.config.lameDuck.duration)) -}}
{{- $_ := set $c "lame_duck_grace_period" (printf "%ds" (int $v.config.lameDuck.gracePeriod)) -}}
{{- end -}}
{{- if $v.config.cluster.enabled -}}
{{- $cl := $v.config.cluster -}}
{{- $routes := list -}}
{{- $auth := include "natsd.routeAuth" . -}}
{{- range $i, $h := splitList "\n" (include "natsd.routeHosts" . | trim) -}}
{{- if $auth -}}
{{- $routes = append $routes (printf "<< $NATSD_ROUTE_%d >>" $i) -}}
{{- else -}}
{{- $routes = append $routes (printf "%s://%s:%d" (include "natsd.routeScheme" $) $h (int $cl.port)) -}}
{{- end -}}
{{- end -}}
{{- $routes = concat $routes $cl.extraRoutes -}}
{{- $cm := dict "name" (include "natsd.clusterName" .) "port" $cl.port "no_advertise" $cl.noAdvertise "routes" $routes -}}
{{- if $cl.connectRetries }}{{ $_ := set $cm "connect_retries" $cl.connectRetries }}{{ end -}}
{{- if $auth -}}
{{- $_ := set $cm "authorization" (dict "user" "<< $NATSD_ROUTE_USER >>" "password" "<< $NATSD_ROUTE_PASSWORD >>") -}}
{{- end -}}
{{- if $cl.tls.enabled -}}
{{- $t := dict "cert_file" (printf "%s/%s" $cl.tls.dir $cl.tls.cert) "key_file" (printf "%s/%s" $cl.tls.dir $cl.tls.key) "verify" $cl.tls.verify "timeout" $cl.tls.timeout -}}
{{- with include "natsd.clusterCAFile" . }}{{ $_ := set $t "ca_file" . }}{{ end -}}
{{- $_ := set $cm "tls" $t -}}
{{- end -}}
{{- $cm = mergeOverwrite $cm (deepCopy $cl.merge) -}}
{{- $_ := set $c "cluster" $cm -}}
{{- end -}}
{{- if $v.config.jetstream.enabled -}}
{{- $js := $v.config.jetstream -}}
{{- $jm := dict -}}
{{- if $js.memoryStore.enabled -}}
{{- with $js.memoryStore.maxSize }}{{ $_ := set $jm "max_memory_store" (include "natsd.size" .) }}{{ end -}}
{{- else -}}
{{- $_ := set $jm "max_memory_store" 0 -}}
{{- end -}}
{{- $_ := set $jm "store_dir" $js.fileStore.dir -}}
{{- if $js.fileStore.enabled -}}
{{- if $js.fileStore.maxSize -}}
{{- $_ := set $jm "max_file_store" (include "natsd.size" $js.fileStore.maxSize) -}}
{{- else if $js.fileStore.pvc.enabled -}}
{{- $_ := set $jm "max_file_store" (include "natsd.size" $js.fileStore.pvc.size) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $jm "max_file_store" 0 -}}
{{- end -}}
{{- $jm = mergeOverwrite $jm (deepCopy $js.merge) -}}
{{- $_ := set $c "jetstream" $jm -}}
{{- end -}}
{{- if $v.auth.enabled -}}
{{- if eq $v.auth.type "user" -}}
{{- $_ := set $c "authorization" (dict "user" "<< $NATSD_USER >>" "password" "<< $NATSD_PASSWORD >>" "timeout" $v.auth.timeout) -}}
{{- else if eq $v.auth.type "token" -}}
{{- $_ := set $c "authorization" (dict "token" "<< $NATSD_TOKEN >>" "timeout" $v.auth.timeout) -}}
{{- else -}}
{{- $_ := set $c "$include" (printf "/etc/nats-auth/%s" $v.auth.includeKey) -}}
{{- end -}}
{{- end -}}
{{- $c = mergeOverwrite $c (deepCopy $v.config.merge) -}}
{{- $json := toPrettyJson $c | replace "\\u003c" "<" | replace "\\u003e" ">" | replace "\\u0026" "&" -}}
{{- $json = regexReplaceAll "\"<< ([^\"]*) >>\"" $json "${1}" -}}
{{- $json = regexReplaceAll "\"[^\"]*\\$include\": (\"[^\"]*\"),?" $json "include ${1}" -}}
{{- $json -}}
{{- end -}}
