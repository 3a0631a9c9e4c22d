{{/* Client auth env (raw values from the Secret, and single-quoted forms for nats.conf:
     an environment value is parsed as a config value, so '...' keeps it a string) */}}
{{- define "natsd.authEnv" -}}
{{- $a := .Values.auth -}}
{{- if and $a.enabled (ne $a.type "include") -}}
{{- if eq $a.type "token" }}
- name: NATSD_TOKEN_RAW
  valueFrom:
    secretKeyRef:
      name: {{ include "natsd.authSecretName" . }}
      key: {{ $a.tokenKey }}
- name: NATSD_TOKEN
  value: "'$(NATSD_TOKEN_RAW)'"
{{- else }}
- name: NATSD_USER_RAW
  valueFrom:
    secretKeyRef:
      name: {{ include "natsd.authSecretName" . }}
      key: {{ $a.userKey }}
- name: NATSD_PASSWORD_RAW
  valueFrom:
    secretKeyRef:
      name: {{ include "natsd.authSecretName" . }}
      key: {{ $a.passwordKey }}
- name: NATSD_USER
  value: "'$(NATSD_USER_RAW)'"
- name: NATSD_PASSWORD
  value: "'$(NATSD_PASSWORD_RAW)'"
{{- end }}
{{- end }}
{{- end -}}

{{- define "natsd.container" -}}
{{- $v := .Values -}}
name: nats
image: {{ include "natsd.image" (dict "image" $v.container.image "global" $v.global "tag" .Chart.AppVersion) }}
{{- with include "natsd.pullPolicy" (dict "image" $v.container.image "global" $v.global) }}
imagePullPolicy: {{ . }}
{{- end }}
args:
  - --config
  - /etc/nats-config/nats.conf
env:
  - name: POD_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  - name: SERVER_NAME
    value: "'{{ $v.config.serverNamePrefix }}$(POD_NAME)'"
  {{- if include "natsd.routeAuth" . }}
  {{- $r := $v.config.cluster.routeURLs }}
  - name: NATSD_ROUTE_USER_RAW
    valueFrom:
      secretKeyRef:
        name: {{ include "natsd.routeSecretName" . }}
        key: {{ $r.userKey }}
  - name: NATSD_ROUTE_PASSWORD_RAW
    valueFrom:
      secretKeyRef:
        name: {{ include "natsd.routeSecretName" . }}
        key: {{ $r.passwordKey }}
  - name: NATSD_ROUTE_USER
    value: "'$(NATSD_ROUTE_USER_RAW)'"
  - name: NATSD_ROUTE_PASSWORD
    value: "'$(NATSD_ROUTE_PASSWORD_RAW)'"
  {{- range $i, $h := splitList "\n" (include "natsd.routeHosts" . | trim) }}
  - name: NATSD_ROUTE_{{ $i }}
    value: "'{{ include "natsd.routeScheme" $ }}://$(NATSD_ROUTE_USER_RAW):$(NATSD_ROUTE_PASSWORD_RAW)@{{ $h }}:{{ int $v.config.cluster.port }}'"
  {{- end }}
  {{- end }}
  {{- include "natsd.authEnv" . | nindent 2 }}
  {{- range $k, $e := $v.container.env }}
  - name: {{ $k }}
    {{- if kindIs "map" $e }}
    {{- toYaml $e | nindent 4 }}
    {{- else }}
    value: {{ $e | toString | quote }}
    {{- end }}
  {{- end }}
ports:
  {{- range $p := splitList " " (include "natsd.protocols" .) }}
  {{- if include "natsd.protocolOn" (dict "ctx" $ "p" $p) }}
  - {{- merge (dict "name" $p "containerPort" (int (get $v.config $p).port)) (deepCopy (get ($v.container.ports | default dict) $p | default dict)) | toYaml | nindent 4 }}
  {{- end }}
  {{- end }}
{{- if $v.config.monitor.enabled }}
{{- $https := and $v.config.monitor.tls.enabled $v.config.nats.tls.enabled }}
{{- with $v.container.startupProbe }}{{ if .enabled }}
startupProbe:
  httpGet:
    path: {{ .path }}
    port: monitor
    {{- if $https }}
    scheme: HTTPS
    {{- end }}
  initialDelaySeconds: {{ .initialDelaySeconds }}
  periodSeconds: {{ .periodSeconds }}
  timeoutSeconds: {{ .timeoutSeconds }}
  failureThreshold: {{ .failureThreshold }}
{{- end }}{{ end }}
{{- with $v.container.readinessProbe }}{{ if .enabled }}
readinessProbe:
  httpGet:
    path: {{ .path }}
    port: monitor
    {{- if $https }}
    scheme: HTTPS
    {{- end }}
  periodSeconds: {{ .periodSeconds }}
  timeoutSeconds: {{ .timeoutSeconds }}
  failureThreshold: {{ .failureThreshold }}
{{- end }}{{ end }}
{{- with $v.container.livenessProbe }}{{ if .enabled }}
livenessProbe:
  httpGet:
    path: {{ .path }}
    port: monitor
    {{- if $https }}
    scheme: HTTPS
    {{- end }}
  periodSeconds: {{ .periodSeconds }}
  timeoutSeconds: {{ .timeoutSeconds }}
  failureThreshold: {{ .failureThreshold }}
{{- end }}{{ end }}
{{- end }}
{{- if $v.config.lameDuck.enabled }}
lifecycle:
  preStop:
    exec:
      # lame duck: stop accepting clients, let them move to the other pods, then exit
      command:
        - nats-server
        - --signal
        - ldm=/var/run/nats/nats.pid
{{- end }}
{{- with $v.container.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.container.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: config
    mountPath: /etc/nats-config
  - name: pid
    mountPath: /var/run/nats
  {{- range $p := splitList " " (include "natsd.tlsProtocols" .) }}
  {{- $t := (get $v.config $p).tls }}
  {{- if and (include "natsd.protocolOn" (dict "ctx" $ "p" $p)) $t.enabled $t.secretName }}
  - name: {{ $p }}-tls
    mountPath: {{ $t.dir | quote }}
  {{- end }}
  {{- end }}
  {{- if include "natsd.caFile" . }}
  - name: tls-ca
    mountPath: {{ $v.tlsCA.dir | quote }}
  {{- end }}
  {{- if and $v.auth.enabled (eq $v.auth.type "include") }}
  - name: auth
    mountPath: /etc/nats-auth
  {{- end }}
  {{- if $v.config.jetstream.enabled }}
  - name: {{ ternary (include "natsd.jsPvcName" .) "js" (eq (include "natsd.jsPvc" .) "true") }}
    mountPath: {{ $v.config.jetstream.fileStore.dir | quote }}
  {{- end }}
  {{- if $v.config.resolver.enabled }}
  - name: {{ ternary (include "natsd.resolverPvcName" .) "resolver" (eq (include "natsd.resolverPvc" .) "true") }}
    mountPath: {{ $v.config.resolver.dir | quote }}
  {{- end }}
{{- end -}}

{{/* The config reloader: (dict "ctx" $ "mounts" the nats container's volumeMounts) */}}
{{- define "natsd.reloaderContainer" -}}
{{- $v := .ctx.Values -}}
{{- $r := $v.reloader -}}
name: reloader
image: {{ include "natsd.image" (dict "image" $r.image "global" $v.global "tag" "") }}
{{- with include "natsd.pullPolicy" (dict "image" $r.image "global" $v.global) }}
imagePullPolicy: {{ . }}
{{- end }}
{{- with $r.env }}
env:
  {{- range $k, $e := . }}
  - name: {{ $k }}
    {{- if kindIs "map" $e }}
    {{- toYaml $e | nindent 4 }}
    {{- else }}
    value: {{ $e | toString | quote }}
    {{- end }}
  {{- end }}
{{- end }}
args:
  - -pid
  - /var/run/nats/nats.pid
  - -config
  - /etc/nats-config/nats.conf
  {{- $h := dict }}
  {{- include "natsd.configDict" (dict "ctx" .ctx "out" $h) }}
  {{- range (include "natsd.configFiles" (dict "node" $h.conf "dir" "/etc/nats-config") | trim | splitList "\n" | compact | uniq) }}
  - -config
  - {{ . | quote }}
  {{- end }}
{{- with $v.container.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: pid
    mountPath: /var/run/nats
  {{- range $m := .mounts }}
  {{- $found := false }}
  {{- range $r.natsVolumeMountPrefixes }}
  {{- if and (not $found) (hasPrefix . (toString $m.mountPath)) }}
  {{- $found = true }}
  - {{- toYaml $m | nindent 4 }}
  {{- end }}
  {{- end }}
  {{- end }}
{{- end -}}

{{- define "natsd.podTemplate" -}}
{{- $v := .Values -}}
metadata:
  labels:
    {{- include "natsd.selectorLabels" . | nindent 4 }}
    {{- with $v.global.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $v.podTemplate.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $ann := deepCopy $v.podTemplate.annotations }}
  {{- if $v.podTemplate.configChecksumAnnotation }}
  {{- $_ := set $ann "checksum/config" (include "natsd.config" . | sha256sum) }}
  {{- end }}
  {{- if $v.metrics.enabled }}
  {{- $_ := set $ann "prometheus.io/scrape" "true" }}
  {{- $_ := set $ann "prometheus.io/port" (toString (int $v.config.monitor.port)) }}
  {{- $_ := set $ann "prometheus.io/path" $v.metrics.path }}
  {{- end }}
  {{- with $ann }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  # discovery is through DNS (the headless Service), not service links
  enableServiceLinks: false
  {{- if $v.reloader.enabled }}
  # the reloader signals natsd (SIGHUP through the pid file)
  shareProcessNamespace: true
  {{- end }}
  {{- if $v.config.lameDuck.enabled }}
  terminationGracePeriodSeconds: {{ default (add (int $v.config.lameDuck.gracePeriod) (int $v.config.lameDuck.duration) 20) $v.statefulSet.terminationGracePeriodSeconds }}
  {{- else }}
  terminationGracePeriodSeconds: {{ default 30 $v.statefulSet.terminationGracePeriodSeconds }}
  {{- end }}
  {{- if $v.serviceAccount.enabled }}
  serviceAccountName: {{ include "natsd.serviceAccountName" . }}
  {{- end }}
  {{- with $v.global.image.pullSecretNames }}
  imagePullSecrets:
    {{- range . }}
    - name: {{ . }}
    {{- end }}
  {{- end }}
  {{- with $v.podTemplate.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.podTemplate.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $v.podTemplate.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.podTemplate.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.podTemplate.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.podTemplate.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- range $key, $c := . }}
    - topologyKey: {{ $key }}
      {{- $c2 := omit $c "topologyKey" }}
      {{- if not (hasKey $c2 "whenUnsatisfiable") }}
      {{- /* required by the API; the nats-io chart's example leaves it out */}}
      {{- $_ := set $c2 "whenUnsatisfiable" "DoNotSchedule" }}
      {{- end }}
      {{- if not (hasKey $c2 "labelSelector") }}
      {{- $_ := set $c2 "labelSelector" (dict "matchLabels" (include "natsd.selectorLabels" $ | fromYaml)) }}
      {{- end }}
      {{- toYaml $c2 | nindent 6 }}
    {{- end }}
  {{- end }}
  containers: []
  volumes:
    - name: config
      configMap:
        name: {{ include "natsd.configMapName" . }}
    - name: pid
      emptyDir: {}
    {{- range $p := splitList " " (include "natsd.tlsProtocols" .) }}
    {{- $t := (get $v.config $p).tls }}
    {{- if and (include "natsd.protocolOn" (dict "ctx" $ "p" $p)) $t.enabled $t.secretName }}
    - name: {{ $p }}-tls
      secret:
        secretName: {{ $t.secretName | quote }}
    {{- end }}
    {{- end }}
    {{- if include "natsd.caFile" . }}
    - name: tls-ca
      {{- if $v.tlsCA.secretName }}
      secret:
        secretName: {{ $v.tlsCA.secretName }}
      {{- else }}
      configMap:
        name: {{ $v.tlsCA.configMapName }}
      {{- end }}
    {{- end }}
    {{- if and $v.auth.enabled (eq $v.auth.type "include") }}
    - name: auth
      secret:
        secretName: {{ include "natsd.authSecretName" . }}
        items:
          - key: {{ $v.auth.includeKey }}
            path: {{ $v.auth.includeKey }}
    {{- end }}
    {{- if and $v.config.jetstream.enabled (not (include "natsd.jsPvc" .)) }}
    - name: js
      emptyDir: {}
    {{- end }}
    {{- if and $v.config.resolver.enabled (not (include "natsd.resolverPvc" .)) }}
    - name: resolver
      emptyDir: {}
    {{- end }}
{{- end -}}

{{/* A volumeClaimTemplate: (dict "pvc" values "name" name "what" "x.pvc"), as YAML */}}
{{- define "natsd.pvc" -}}
{{- $p := .pvc -}}
{{- $spec := dict "accessModes" (list "ReadWriteOnce") "resources" (dict "requests" (dict "storage" (toString $p.size))) -}}
{{- with $p.storageClassName }}{{ $_ := set $spec "storageClassName" (toString .) }}{{ end -}}
{{- $mp := dict "doc" (dict "metadata" (dict "name" .name) "spec" $spec) "merge" $p.merge "patch" $p.patch "what" .what -}}
{{- include "natsd.mergePatch" $mp -}}
{{- toYaml $mp.doc -}}
{{- end -}}
