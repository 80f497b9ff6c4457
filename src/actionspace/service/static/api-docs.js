/* /docs: Swagger UI over this server's OpenAPI document, from the vendored bundle (no CDN). */
window.addEventListener("load", function () {
  // validatorUrl: null — the default validator badge would call validator.swagger.io
  window.SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null });
});
