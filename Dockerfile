# actionspace `serve` (JSON API and console) and `gateway` (MCP), built from the wheel.
#
#   docker build -t actionspace .
#   docker run -p 8765:8765 -v actionspace-data:/data actionspace                 # serve
#   docker run -p 8766:8766 -v $PWD/gw:/config actionspace \
#       gateway --config /config/gateway.toml --transport http --host 0.0.0.0 --port 8766
#
# The store defaults to /data/actionspace.db (a volume); pass --store postgresql://… to share one.

FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 actionspace && mkdir /data && chown actionspace /data
COPY --from=wheel /wheels /wheels
RUN WHEEL="$(ls /wheels/actionspace-*.whl)" \
    && pip install --no-cache-dir "${WHEEL}[service,mcp,postgres]" \
    && rm -rf /wheels
USER actionspace
ENV ACTIONSPACE_STORE=sqlite:////data/actionspace.db \
    PYTHONUNBUFFERED=1
VOLUME ["/data"]
EXPOSE 8765 8766
ENTRYPOINT ["actionspace"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8765"]
